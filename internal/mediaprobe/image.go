package mediaprobe

import (
	"errors"

	"image"
	"image/jpeg"
	"image/png"
	"io"

	"golang.org/x/image/webp"
)

// probeStdImage reads a JPEG, PNG or WEBP header with the decoders'
// DecodeConfig, which stop after the header.
func probeStdImage(r io.ReaderAt, info *Info) error {
	sr := io.NewSectionReader(r, 0, info.Size)
	var cfg image.Config
	var err error
	switch info.Format {
	case FormatJPEG:
		cfg, err = jpeg.DecodeConfig(sr)
	case FormatPNG:
		cfg, err = png.DecodeConfig(sr)
	case FormatWEBP:
		cfg, err = webp.DecodeConfig(sr)
	}
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return malformed("%s header is truncated", info.Format)
		}
		return malformed("%s header: %v", info.Format, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return malformed("%s header gives a %dx%d picture", info.Format, cfg.Width, cfg.Height)
	}
	info.Width, info.Height = cfg.Width, cfg.Height
	return nil
}

// probeHEIF reads the size of a HEIF image's primary item: the ispe
// property associated with the item pitm names (ISO/IEC 23008-12), or the
// first ispe when the file has no association for it.
func probeHEIF(r io.ReaderAt, info *Info) error {
	meta, err := findTopBox(r, info.Size, "meta", maxMetaBytes)
	if err != nil {
		return err
	}
	if len(meta) < 4 {
		return malformed("HEIF meta box is empty")
	}
	children := meta[4:] // a full box: version and flags first
	primary := uint32(0)
	hasPrimary := false
	if pitm, ok := childBox(children, "pitm"); ok && len(pitm) >= 6 {
		if pitm[0] == 0 {
			primary, hasPrimary = uint32(be16(pitm[4:])), true
		} else if len(pitm) >= 8 {
			primary, hasPrimary = be32(pitm[4:]), true
		}
	}
	iprp, ok := childBox(children, "iprp")
	if !ok {
		return malformed("HEIF file has no item properties (iprp)")
	}
	ipco, ok := childBox(iprp, "ipco")
	if !ok {
		return malformed("HEIF file has no property container (ipco)")
	}
	var props []box
	walkBoxes(ipco, func(b box) bool { props = append(props, b); return len(props) < maxBoxes })
	ispe := func(b box) (int, int, bool) {
		if b.typ != "ispe" || len(b.body) < 12 {
			return 0, 0, false
		}
		return int(be32(b.body[4:])), int(be32(b.body[8:])), true
	}
	if hasPrimary {
		if ipma, ok := childBox(iprp, "ipma"); ok {
			for _, idx := range itemProperties(ipma, primary) {
				if idx >= 1 && idx <= len(props) {
					if w, h, ok := ispe(props[idx-1]); ok {
						info.Width, info.Height = w, h
						return checkPicture(info)
					}
				}
			}
		}
	}
	for _, p := range props {
		if w, h, ok := ispe(p); ok {
			info.Width, info.Height = w, h
			return checkPicture(info)
		}
	}
	return malformed("HEIF file has no image size property (ispe)")
}

func checkPicture(info *Info) error {
	if info.Width <= 0 || info.Height <= 0 || info.Width > 1<<20 || info.Height > 1<<20 {
		return malformed("%s gives a %dx%d picture", info.Format, info.Width, info.Height)
	}
	return nil
}

// itemProperties returns the 1-based ipco indexes associated with item
// in an ipma box's body.
func itemProperties(ipma []byte, item uint32) []int {
	if len(ipma) < 8 {
		return nil
	}
	version, flags := ipma[0], ipma[3]
	count := be32(ipma[4:])
	p := ipma[8:]
	for i := uint32(0); i < count && len(p) > 0; i++ {
		var id uint32
		if version < 1 {
			if len(p) < 3 {
				return nil
			}
			id, p = uint32(be16(p)), p[2:]
		} else {
			if len(p) < 5 {
				return nil
			}
			id, p = be32(p), p[4:]
		}
		n := int(p[0])
		p = p[1:]
		width := 1
		if flags&1 != 0 {
			width = 2
		}
		if len(p) < n*width {
			return nil
		}
		if id == item {
			out := make([]int, 0, n)
			for j := range n {
				if width == 2 {
					out = append(out, int(be16(p[j*2:])&0x7FFF))
				} else {
					out = append(out, int(p[j]&0x7F))
				}
			}
			return out
		}
		p = p[n*width:]
	}
	return nil
}
