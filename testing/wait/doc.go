// Package wait is the tests' one way to wait for something real goroutines,
// processes or a network do: poll a condition with a short growing interval
// until it holds or a deadline passes.
//
//	For(t, 0, "the grant", granted)     fails t after Timeout
//	Until(5*time.Second, granted)       reports true/false, caller decides
//	Never(t, 200*time.Millisecond, ...) asserts a condition stays false
//	Sleep(ctx, d)                       pacing (think time, a schedule's next
//	                                    event) that a cancelled ctx cuts short
//	Closed(done)                        whether a done channel is closed, now
//	For(t, 0, "the master", Every(50*time.Millisecond, costly))
//	                                    a condition too costly to check every
//	                                    few milliseconds (it runs a process)
//
// Lease and lock-delay deadlines are moved by a manual clock in unit tests,
// not waited for; this package is for the parts no clock controls.
package wait
