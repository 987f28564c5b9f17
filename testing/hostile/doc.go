// Package hostile is the hostile-client suite of issue 17 ("no single
// client can stall, wedge or exhaust the cell"): each test replays one of
// the findings against a real chubbyd process on loopback
// (testing/proc), with bounded counts, and asserts the bound the fix
// promises. Raw wire clients (testing/cell's RawConn) write frames without
// waiting for replies; a well-behaved "bystander" session (the client
// library) is timed beside them.
//
//	test                          finding  hostile client                         bound asserted
//	TestPipelinedWritesDoNotStall 1        one session pipelines 25,000           bystander writes p99 ≤ 100 ms;
//	                                       SetContents of one file                every pipelined write answered
//	TestQueuedAcquiresDoNotStall  1        50,000 sessions on 50 connections,     bystander writes p99 ≤ 100 ms
//	                                       a blocking Acquire each, on one        while the queue builds and
//	                                       held lock (a session queues once       stands; the head is granted
//	                                       per lock)                              on release
//	TestHugeDirectoryLists        2        100,000 children in one directory;     chubbysh ls prints every child,
//	                                       4,200 children of 250-byte names       in order (pages past 1 MiB)
//	TestMassExpiryProcess         3        1,000,000 sessions of a 60 s TTL     all gone within TTL + 30 s of
//	                                       created and abandoned                  the last one's creation; no
//	                                                                              lease renewed for a "stall";
//	                                                                              a summarised log
//	TestStalledFramesBounded      4        2,000 connections send all but 40      chubbyd VmRSS ≤ 500 MB while
//	                                       bytes of a 1 MiB frame, then a         they hold; chubbysh ls answers;
//	                                       byte a second                          RSS after close reported
//	TestDeepNestingRefused        4        64 connections at once, 3 rounds, a    bad_request "nested deeper" and
//	                                       1 MiB body of 1,048,575 nested arrays  close; VmHWM ≤ start + frames
//	                                                                              + 64 MB
//	TestExpiryLogSummarised       5        20,000 sessions abandoned at once      a few INFO summary lines whose
//	                                       (1 s TTL)                              counts add up; no line per
//	                                                                              session
//	TestRemoveServerGuarded       6        a non-admin's remove-server; an        refused (permission denied;
//	                                       admin's that leaves < a quorum         quorum) and not logged as done;
//	                                       (TLS cell of three servers)            voters unchanged
//	TestDeceptiveNamesRefused     7        chubbysh create/mkdir of names with    exit 1, one error line naming
//	                                       U+202E and U+200B                      the character; nothing created
//
// Scale. The default `go test ./testing/hostile` runs the tests whose
// full acceptance counts take under about 30 s on a 2-core machine at
// those counts (pipeline, directories, expiry, names, remove-server) and
// the others at reduced counts (10,000 queued Acquires, 100,000 abandoned
// sessions of a 10 s TTL, 500 stalled
// frames, 32 nesting senders), asserting the same bounds. The full
// counts:
//
//	CHUBBY_HOSTILE_FULL=1 go test ./testing/hostile -v -count=1 -timeout 20m
//
// The measured figures (latency quantiles, RSS, durations, log line
// counts) are printed with t.Logf: run with -v to see them. The tests run
// one at a time (no t.Parallel): each measures latency or memory, which
// another test's load would disturb; so does other load on the machine,
// so rerun a latency test that failed before concluding.
//
// The fuzz targets for the frame reader with partial frames and deep
// nesting are in package wire (FuzzReadFramePartial, FuzzDecodeNested).
package hostile
