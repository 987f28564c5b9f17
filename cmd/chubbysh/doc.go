// Command chubbysh is the chubby shell: one-shot commands, scripts on stdin
// (one session for the whole script) and an interactive prompt.
//
//	chubbysh [-cell ADDRS] [-ttl DUR] [-timeout DUR] [-json] [COMMAND ARGS...]
//
// Exit codes: 0 ok; 1 the operation failed; 2 usage error; 3 the cell could
// not be reached or the session expired.
//
// The three modes share one command table (commands.go) and one session per
// invocation:
//
//	chubbysh CMD ARGS      one-shot: parse, dial, run, exit with the code
//	chubbysh < script      script: one line at a time, stop at the first failure
//	chubbysh (a terminal)  interactive (interactive.go): readline prompt with
//	                       history, completion (complete.go), a current
//	                       directory (paths.go), session events shown as
//	                       they happen; Ctrl-C cancels the running command
//
// Only the interactive shell has a current directory: in the other modes a
// PATH is sent exactly as given, as CONTRACT.md has it.
package main
