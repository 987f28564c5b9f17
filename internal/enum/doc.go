// Package enum names the values of the module's small integer enums (ops,
// methods, states, fault kinds) from one table each, so that every String
// method is a table and one call.
//
//	var stateNames = [...]string{Safe: "safe", Expired: "expired"}
//	func (s State) String() string { return enum.Name(stateNames[:], s, "State") }
package enum
