/// A proxy's server leg that several waiting client legs could belong to (two clients connected at
/// once, and the proxy's dials may overtake each other): it waits, its events held, until its
/// payload tells which client leg it relays.
struct PendingServerLeg {
    /// The server leg (proxy → server), role `.pending`.
    let flow: TCPFlow
    /// The client legs it may relay, oldest first (some may since have been taken by other legs).
    let candidates: [TCPFlow]
}
