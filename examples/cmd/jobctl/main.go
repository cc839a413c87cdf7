// Command jobctl drives a jobd cluster over its HTTP API, through the
// public Go client (examples/client): it fails over between members and
// never repeats an operation blindly.
//
//	jobctl help [COMMAND]
//	jobctl [flags] submit -queue Q -kind K [-id ID] [-payload TEXT | -payload-file F] [-unique [-unique-period D] [-unique-states S,...]] ...
//	jobctl [flags] get ID
//	jobctl [flags] list [-queue Q] [-state S] [-limit N]
//	jobctl [flags] watch [-from N] [-queue Q] [-event E] [-kind K] [-job ID] [-n N]
//	jobctl [flags] cancel ID [-reason TEXT]
//	jobctl [flags] retry ID
//	jobctl [flags] claim -queue Q [-worker W] [-max N] [-lease-ttl D] [-wait D]
//	jobctl [flags] ack ID -lease T [-result TEXT | -result-file F]
//	jobctl [flags] nak ID -lease T [-delay D] [-error TEXT] | term ID -lease T [-reason TEXT] | extend ID -lease T
//	jobctl [flags] pause QUEUE | resume QUEUE
//	jobctl [flags] limit QUEUE MAX [-kind K] | limit-clear QUEUE [-kind K] | rate QUEUE PER-SECOND [-burst N] | rate-clear QUEUE | limits
//	jobctl [flags] stats | members | walcompare [-from N] [-to N]
//	jobctl [flags] backup -o FILE
//	jobctl verify-backup FILE
//
// Flags (before or after the command): -endpoints (or $JOBD_ENDPOINTS),
// -token / -token-file (or $JOBD_TOKEN), -ca, -json, -timeout.
//
// Exit status: 0 ok; 1 other error; 2 usage; 3 not found; 4 refused
// (invalid request, conflict with the job's state, unauthorized: nothing
// changed); 5 outcome unknown (a change that may have happened: see the
// message for how to find out); 6 unavailable (no member could take it:
// nothing changed); 7 no endpoint is a jobd API (nothing listening, http
// against https or the reverse, an untrusted certificate, a member's raft
// port instead of its API port: the message says which; nothing was sent
// to jobd); 8 a check failed (walcompare found committed divergences, a
// backup does not verify).
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jobraft/jobraft/backup"
	"github.com/jobraft/jobraft/examples/client"
)

// Exit statuses.
const (
	exitOK          = 0
	exitError       = 1
	exitUsage       = 2
	exitNotFound    = 3
	exitRefused     = 4
	exitUnknown     = 5
	exitUnavailable = 6
	exitEndpoint    = 7
	exitCheckFailed = 8
)

// errCheck: a check the command runs failed (exit 8).
var errCheck = errors.New("check failed")

// errEndpoint: no endpoint is a jobd API (exit 7; preflight.go).
var errEndpoint = errors.New("no endpoint is a jobd API")

// usageError is a command-line error (exit 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// globals are the flags every command takes.
type globals struct {
	endpoints string
	token     string
	tokenFile string
	ca        string
	json      bool
	timeout   time.Duration
}

// defaultEndpoints: jobd's default -http-addr and start-cluster.sh's
// three members.
const defaultEndpoints = "http://127.0.0.1:8400,http://127.0.0.1:8401,http://127.0.0.1:8402,http://127.0.0.1:8403"

func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.endpoints, "endpoints", "", "jobd API base URLs, comma-separated (default: $JOBD_ENDPOINTS, else "+defaultEndpoints+")")
	fs.StringVar(&g.token, "token", "", "bearer token (default $JOBD_TOKEN)")
	fs.StringVar(&g.tokenFile, "token-file", "", "file holding the bearer token")
	fs.StringVar(&g.ca, "ca", "", "CA certificate (PEM) for https endpoints")
	fs.BoolVar(&g.json, "json", false, "print JSON instead of a table")
	fs.DurationVar(&g.timeout, "timeout", 30*time.Second, "bound on the whole command, 0 for none (watch and backup: none unless given)")
}

// client returns the client: its first request is preceded by the
// preflight of every endpoint (preflight.go).
func (g *globals) client() (*client.Client, error) {
	eps := g.endpoints
	if eps == "" {
		eps = os.Getenv("JOBD_ENDPOINTS")
	}
	if eps == "" {
		eps = defaultEndpoints
	}
	tok := g.token
	if tok == "" {
		tok = os.Getenv("JOBD_TOKEN")
	}
	if g.tokenFile != "" {
		b, err := os.ReadFile(g.tokenFile)
		if err != nil {
			return nil, usagef("-token-file: %v", err)
		}
		tok = strings.TrimSpace(string(b))
	}
	var tc *tls.Config
	if g.ca != "" {
		pem, err := os.ReadFile(g.ca)
		if err != nil {
			return nil, usagef("-ca: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usagef("-ca: no certificate in %s", g.ca)
		}
		tc = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	list := strings.Split(eps, ",")
	c, err := client.New(client.Config{Endpoints: list, Token: tok, HTTPClient: preflighted(list, tc)})
	if err != nil {
		return nil, usagef("%v", err)
	}
	return c, nil
}

// command is one subcommand: flags registers its own flags; run gets the
// positional arguments.
type command struct {
	args  string // synopsis of the arguments
	help  string
	long  bool // no -timeout unless given
	flags func(fs *flag.FlagSet)
	run   func(ctx context.Context, e *env, args []string) error
}

// env is what a command runs with.
type env struct {
	g   *globals
	out io.Writer
	c   *client.Client
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs one jobctl command line and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	g := &globals{}
	top := flag.NewFlagSet("jobctl", flag.ContinueOnError)
	top.SetOutput(stderr)
	g.register(top)
	top.Usage = func() { usage(top) }
	if err := top.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if top.NArg() == 0 {
		fmt.Fprintln(stderr, "jobctl: no command given (jobctl help lists them)")
		usage(top)
		return exitUsage
	}
	name, rest := top.Arg(0), top.Args()[1:]
	if name == "help" {
		return help(top, rest, stdout, stderr)
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "jobctl: unknown command %q (jobctl help lists them)\n", name)
		return exitUsage
	}
	g, fs := commandFlags(top, name, cmd)
	fs.SetOutput(stderr)
	if err := fs.Parse(interleave(fs, rest)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	timeoutSet := false
	fs.Visit(func(f *flag.Flag) { timeoutSet = timeoutSet || f.Name == "timeout" })
	if cmd.long && !timeoutSet {
		g.timeout = 0 // a watch or a large backup runs as long as it needs
	}
	if g.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.timeout)
		defer cancel()
	}
	e := &env{g: g, out: stdout}
	var err error
	if name != "verify-backup" {
		e.c, err = g.client()
	}
	if err == nil {
		err = cmd.run(ctx, e, fs.Args())
	}
	code := exitCode(err)
	if err != nil {
		fmt.Fprintf(stderr, "jobctl %s: %s\n", name, errorText(err))
		if code == exitUsage {
			fmt.Fprintf(stderr, "usage: jobctl %s [flags] %s (jobctl help %s: every flag)\n", name, cmd.args, name)
		}
	}
	return code
}

// commandFlags is the flag set of command name: the global flags (their
// values as given before the command, unless repeated after it) and the
// command's own.
func commandFlags(top *flag.FlagSet, name string, cmd *command) (*globals, *flag.FlagSet) {
	fs := flag.NewFlagSet("jobctl "+name, flag.ContinueOnError)
	g := &globals{} // top's values stay in top's struct
	g.register(fs)
	top.Visit(func(f *flag.Flag) { _ = fs.Set(f.Name, f.Value.String()) })
	if cmd.flags != nil {
		cmd.flags(fs)
	}
	fs.Usage = func() { commandUsage(fs, name, cmd) }
	return g, fs
}

// commandUsage prints one command's synopsis, its help and its flags.
func commandUsage(fs *flag.FlagSet, name string, cmd *command) {
	fmt.Fprintf(fs.Output(), "usage: jobctl %s [flags] %s\n%s\n\nflags:\n", name, cmd.args, cmd.help)
	fs.PrintDefaults()
	fmt.Fprintln(fs.Output(), "\n"+exitStatuses)
}

// help: jobctl help lists the commands, jobctl help COMMAND shows one,
// on stdout.
func help(top *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		top.SetOutput(stdout)
		usage(top)
		return exitOK
	case len(args) > 1:
		fmt.Fprintf(stderr, "jobctl help: one command at a time (got %q)\n", args)
		return exitUsage
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "jobctl help: unknown command %q (jobctl help lists them)\n", args[0])
		return exitUsage
	}
	_, fs := commandFlags(top, args[0], cmd)
	fs.SetOutput(stdout)
	commandUsage(fs, args[0], cmd)
	return exitOK
}

// errorText is how jobctl prints err: a reply jobd refused or failed
// reads "<reason> (HTTP <status> <kind> from <member>)", the reason first.
func errorText(err error) string {
	var ce *client.Error
	var pe *preflightError
	switch {
	case errors.As(err, &pe):
		return pe.Error()
	case errors.As(err, &ce) && ce.Status != 0 && err.Error() == ce.Error():
		return fmt.Sprintf("%s (HTTP %d %s from %s)", ce.Reason, ce.Status, ce.Code, ce.Endpoint)
	}
	return err.Error()
}

// interleave moves flags given after positional arguments ("get ID -json")
// in front of them, so both orders work.
func interleave(fs *flag.FlagSet, args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		if f := fs.Lookup(name); f != nil {
			if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() {
				continue
			}
			if i+1 < len(args) {
				flags = append(flags, args[i+1])
				i++
			}
		}
	}
	return append(flags, pos...)
}

// exitCode maps an error to the documented exit status.
func exitCode(err error) int {
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		return exitUsage
	case errors.Is(err, errCheck), errors.Is(err, backup.ErrCorrupt):
		return exitCheckFailed
	case errors.Is(err, client.ErrNotFound):
		return exitNotFound
	case errors.Is(err, client.ErrRefused), errors.Is(err, client.ErrUnauthorized):
		return exitRefused
	case errors.Is(err, client.ErrOutcomeUnknown):
		return exitUnknown
	case errors.Is(err, errEndpoint): // before ErrUnavailable: the client saw it as a refused dial
		return exitEndpoint
	case errors.Is(err, client.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return exitUnavailable
	}
	return exitError
}

// exitStatuses documents the exit statuses (jobctl help).
const exitStatuses = `exit status:
  0  ok
  1  another error
  2  usage: a command, argument or flag is missing or wrong
  3  not found
  4  refused: invalid, conflicting with the job's state, or unauthorized (nothing changed)
  5  outcome unknown: a change that may have happened (the message says how to find out)
  6  unavailable: no member could take it (nothing changed)
  7  no endpoint is a jobd API: nothing listening, http against https or the reverse,
     an untrusted certificate (-ca), a member's raft port instead of its API port
     (the message says which; nothing was sent to jobd)
  8  a check failed (walcompare divergences, a corrupt backup)`

func usage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprintln(w, "usage: jobctl [flags] COMMAND [flags] [ARGS]   (jobctl help COMMAND: its flags)\n\ncommands:")
	for _, name := range commandOrder {
		c := commands[name]
		fmt.Fprintf(w, "  %-22s %s\n", name+" "+c.args, c.help)
	}
	fmt.Fprintln(w, "\nflags (before or after the command):")
	fs.PrintDefaults()
	fmt.Fprintln(w, "\n"+exitStatuses)
}
