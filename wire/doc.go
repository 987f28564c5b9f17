// Package wire defines the RPC between the chubby client and chubbyd: length
// prefixed msgpack frames over TCP, a Request/Response envelope with a call
// id (many calls in flight per connection), and one argument and one reply
// type per Method. Both sides import it; it imports only fs for data types.
//
//	frame    = uint32 big-endian length ‖ msgpack body   (length ≤ MaxFrame)
//	Request  = {id, method, epoch, session, body}
//	Response = {id, code, error, body}    code "" means success
//
// A server that reads a malformed frame or envelope, or an unknown method,
// answers with a bad_request Response (id 0 if it could not read one) and
// closes that connection only.
package wire
