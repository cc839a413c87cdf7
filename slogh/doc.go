// Package slogh adapts log/slog to hashicorp/go-hclog: New returns an
// hclog.Logger that writes through a slog.Handler, so a host that logs with
// slog can pass its handler to jobraft (raft.Config.Logger, and with it
// hashicorp/raft's own logs) and get one log stream.
//
//	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
//	cfg := jobraft.Config{Config: raft.Config{Logger: slogh.New(logger.Handler()), ...}}
//
// # Mapping
//
//   - Levels: hclog Trace, Debug, Info, Warn and Error are slog LevelTrace
//     (Debug-4), LevelDebug, LevelInfo, LevelWarn and LevelError; NoLevel
//     logs at Info; Off drops the record.
//   - Which records are written is the handler's decision (its
//     Enabled), further limited by SetLevel when it was called with a level
//     other than NoLevel. SetLevel affects the logger and every logger
//     derived from it (Named, With), as hclog's default does. GetLevel
//     reports that level, or else the lowest level the handler enables.
//   - Named: the logger's name ("a.b" after Named("a").Named("b")) is the
//     attribute NameKey of every record; ResetNamed replaces it.
//   - With: implied arguments become handler attributes (slog's WithAttrs),
//     ahead of each record's own; ImpliedArgs returns them. Keys are not
//     deduplicated.
//   - Arguments are alternating keys and values; a key that is not a
//     string is formatted with fmt.Sprint, and a value left without a key
//     is logged under hclog.MissingKey. hclog.Fmt, Hex, Octal, Binary and
//     Quote values are formatted as hclog formats them; other values,
//     errors included, are handed to the handler as they are.
//   - The record's source (HandlerOptions.AddSource) is the caller of the
//     hclog method; lines written through StandardLogger or
//     StandardWriter carry none.
package slogh
