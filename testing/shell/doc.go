// Package shell tests chubbysh's interactive mode the way an operator meets
// it: the real binary on a pseudo-terminal (github.com/creack/pty, so no
// tmux or other program is needed), a real chubbyd started through
// testing/proc, HOME pointing at a temporary directory (the history file)
// and TERM=xterm.
//
//	test ──keys──► pty master ══ pty slave ──► chubbysh (session leader, the
//	  ▲                                         pty its controlling terminal)
//	  └── screen bytes ◄── reader goroutine ◄──┘  ANSI stripped for matching
//
// Tests type keys (Tab, Up, Ctrl-C as "\x03", Ctrl-D as "\x04") and wait
// for the text they expect on the screen, with a deadline; they never sleep
// to let the shell catch up. Where the terminal's mode matters (Ctrl-C is a
// key at the prompt and a signal while a command runs), they wait for the
// mode itself (WaitCooked).
//
//	test                         checks (issue 6)
//	TestCompletion               Tab: command names, flags, a path to /ls/local/app/, relative paths, cd dirs only;
//	                             the client cache serves the repeated listings
//	TestHistory                  Up recalls the previous line; history survives into the next shell; bounded at 1000 lines
//	TestCdPwdRelativePaths       cd/pwd, relative paths and ".." resolved by the shell, prompt shows the directory
//	TestCtrlCCancelsLock         Ctrl-C in a blocked lock: back at the prompt, not queued, lock not taken; Ctrl-C in sleep; at an empty prompt a hint
//	TestExitReleasesLocks        exit and Ctrl-D end the session: another session's trylock succeeds at once
//	TestSignalsLeaveCleanly      SIGHUP at the prompt, SIGTERM in a command: exit 0, locks released
//	TestUnknownCommandSuggests   did you mean, in the shell and in one-shot and script mode (exit 2)
//	TestColour                   errors in red on a terminal; no colour with NO_COLOR or -json
//	TestSessionEventsRedrawLine  jeopardy and safe shown as they happen, the prompt's state updated, the typed line kept
//	TestHelp                     help lists every command; help COMMAND shows usage and an example
package shell
