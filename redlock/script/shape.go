package script

// Shape says how a vote compares one reply across backends (the vote
// applies it: package redlock, agree.go). The zero Shape compares an
// array element by element, in order, at every depth.
type Shape struct {
	Order Order
	// Elems are the shapes of an InOrder array's elements by position (a
	// script's table constructor); elements past them have the zero Shape.
	Elems []Shape
}

// Order is how the elements of an array reply are compared.
type Order uint8

const (
	// InOrder: element by element (LRANGE, ZRANGE, HMGET, a script's table).
	InOrder Order = iota
	// AnyOrder: as a multiset, in any order (SMEMBERS, SINTER, SUNION,
	// SDIFF, HKEYS, HVALS: a backend's hash table order is its own).
	AnyOrder
	// PairsAnyOrder: as field/value pairs in any order (HGETALL).
	PairsAnyOrder
)
