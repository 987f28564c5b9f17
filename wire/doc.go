// Package wire defines the RPC between the chubby client and chubbyd: length
// prefixed msgpack frames over TCP, a Request/Response envelope with a call
// id (many calls in flight per connection), and one argument and one reply
// type per Method. Both sides import it; it imports only fs for data types.
//
//	frame    = uint32 big-endian length ‖ msgpack body   (length ≤ MaxFrame)
//	Request  = {id, method, epoch, session, call, acked, secret, body}
//	Response = {id, code, error, body}    code "" means success
//
// A call that names a session carries the session's secret
// (CreateSessionReply.Secret); the master refuses it with
// permission_denied otherwise.
//
// A server that reads a malformed frame or envelope, or an unknown method,
// answers with a bad_request Response (id 0 if it could not read one) and
// closes that connection only.
package wire
