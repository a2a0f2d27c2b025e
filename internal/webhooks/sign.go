// Package webhooks sends sluice's events to HTTP receivers as Standard
// Webhooks 1.0 describes (docs/webhooks.md): a durable consumer of
// SLUICE_EVENTS fans each event out into one delivery message per
// destination on a work-queue stream, and a sender posts each delivery,
// signed, until the receiver answers 2xx or about three days have passed.
// Subscriptions, the tenants' notify secrets and the delivery records live
// in the SLUICE_WEBHOOKS key-value bucket.
package webhooks

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
)

// SecretPrefix starts every signing secret, as Standard Webhooks says.
const SecretPrefix = "whsec_"

// NewSecret returns a new signing secret: SecretPrefix and 32 random bytes
// in standard base64.
func NewSecret() string {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // crypto/rand.Read never fails (Go 1.24+)
	return SecretPrefix + base64.StdEncoding.EncodeToString(key)
}

// Signature is the webhook-signature header of a delivery: one
// "v1,<base64 HMAC-SHA256>" over "id.timestamp.body" per secret, separated
// by spaces (two while a secret rotates). A secret that is not
// SecretPrefix and base64 is an error.
func Signature(secrets []string, id string, timestamp int64, body []byte) (string, error) {
	sigs := make([]string, 0, len(secrets))
	for _, s := range secrets {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, SecretPrefix))
		if err != nil || len(key) == 0 {
			return "", fmt.Errorf("signing secret is not %s<base64>", SecretPrefix)
		}
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(id + "." + strconv.FormatInt(timestamp, 10) + "."))
		mac.Write(body)
		sigs = append(sigs, "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	}
	return strings.Join(sigs, " "), nil
}
