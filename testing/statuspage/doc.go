// Package statuspage tests chubbyd's status page (issue 15) the way a
// person reads it: a headless Chromium, driven with chromedp, opens the
// page of a real three-server cell (testing/proc) in which Go clients hold
// locks and queue waiters, and the test reads what is on the screen.
//
//	TestStatusPageInBrowser   the master named, session/lock/waiter counts
//	                          right, the contended lock listed with its
//	                          holder and waiters, its node page; a SIGKILLed
//	                          follower shown down after the page refreshed
//	                          itself; no sideways scrolling on a phone-sized
//	                          screen; screenshots saved to docs/
//
// Chromium is found as chromium, chromium-browser, google-chrome or
// headless-shell on PATH (or at $CHUBBY_CHROMIUM). Without one the test
// skips — unless CHUBBY_REQUIRE_BROWSER=1, which .ci/run sets after
// installing Debian's chromium, so CI cannot skip it silently.
package statuspage
