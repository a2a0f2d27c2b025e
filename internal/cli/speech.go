package cli

import (
	"context"

	"github.com/sluice-dev/sluice/internal/jobspec"
)

func runSpeech(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("speech")
	var (
		sf                                    specFlags
		pf                                    publishFlags
		model, text, voice, mode, lang, instr string
		optimize                              optBool
	)
	fs.StringVar(&model, "model", "", "speech model name (required)")
	fs.StringVar(&text, "text", "", "text to synthesize (required)")
	fs.StringVar(&voice, "voice", "", "voice identifier (required)")
	fs.StringVar(&mode, "mode", "", "sync, async or stream (default async)")
	fs.StringVar(&lang, "language", "", "language type, e.g. English")
	fs.StringVar(&instr, "instructions", "", "instructions for tone, emotion and speaking rate")
	fs.Var(&optimize, "optimize-instructions", "ask upstream to optimize --instructions")
	sf.register(fs)
	pf.register(fs, false)
	h := help{
		usage: "enqueue speech --model M --text TEXT --voice V [--mode sync|async|stream] [flags]",
		about: `Publish one speech job. --mode async (the default) creates an upstream task
and polls it; sync takes the result from the submit response; stream reads
the audio as Server-Sent Events and stores it as one object.` + "\n" + publishAbout,
		examples: `  enqueue speech --model M --text "Welcome aboard." --voice voice-b --wait
  enqueue speech --model M --text "Bonjour" --voice v1 --language French --mode stream \
      --instructions "warm and slow" --id line-0002 --json`,
		exits: true,
	}
	rest, err := a.parse(fs, h.printer(fs), args)
	if err != nil {
		return err
	}
	if err := noArgs("speech", rest); err != nil {
		return err
	}
	spec := &jobspec.Spec{Kind: jobspec.KindSpeech, Speech: &jobspec.Speech{
		Model: model,
		Input: jobspec.SpeechInput{
			Text: text, Voice: voice, LanguageType: lang, Instructions: instr,
			OptimizeInstructions: optimize.ptr(),
		},
		Mode: jobspec.SpeechMode(mode),
	}}
	sf.apply(spec)
	names := flagNames{
		"speech":                             "--model",
		"speech.model":                       "--model",
		"speech.mode":                        "--mode",
		"speech.input":                       "--text",
		"speech.input.text":                  "--text",
		"speech.input.voice":                 "--voice",
		"speech.input.language_type":         "--language",
		"speech.input.instructions":          "--instructions",
		"speech.input.optimize_instructions": "--optimize-instructions",
	}
	return a.runBuilt(ctx, spec, names, &pf)
}
