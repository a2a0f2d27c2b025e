// Package artifacts moves bytes to S3 safely: it streams media results,
// speech audio and compute outputs into deterministic keys
// (docs/artifacts.md) with multipart upload, hashing and counting on the way and
// never holding an artifact whole in memory or on disk; every object gets
// its Content-Type and its SHA-256 in user metadata "sha256".
//
// A Store writes (Put once, Copy with retries), reads (Open), presigns and
// inspects objects; a Fetcher downloads sources over HTTP(S) without ever
// reaching a private address unless allowed, following bounded redirects,
// enforcing a size limit and keeping URL query strings (presigned
// signatures) out of every error.
package artifacts
