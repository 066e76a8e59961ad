import ArgumentParser
import ChaosControl
import ChaosCore

/// Who may use the control API (`chaos run --metrics`, `chaos proxy --api`): open on loopback, a bearer token anywhere
/// else (``APIAccess``).
struct APIAccessOptions: ParsableArguments {
    @Option(
        name: .customLong("api-token-file"),
        help: "A file holding the bearer token the control API requires (needed when it is bound anywhere but loopback)."
    )
    var apiTokenFile: String?

    @Flag(name: .customLong("metrics-open"), help: "Serve GET /metrics without the token (figures only), for a Prometheus scraper.")
    var metricsOpen = false

    /// The access for an API bound at `address`; an API off loopback without a token is refused (exit 2).
    func access(for address: HostPort?, flag: String) throws -> APIAccess {
        guard let address else {
            if apiTokenFile != nil || metricsOpen { throw ValidationError("--api-token-file and --metrics-open go with \(flag) HOST:PORT") }
            return .open
        }
        if let apiTokenFile { return try APIAccess(tokenFile: apiTokenFile, metricsOpen: metricsOpen) }
        guard APIAccess.isLoopback(address.host) else {
            throw ValidationError(
                "\(flag) \(address) is not a loopback address: the API then serves the audited traffic and injects faults, "
                    + "so it needs --api-token-file FILE (a bearer token), e.g. from a Kubernetes Secret"
            )
        }
        if metricsOpen { throw ValidationError("--metrics-open goes with --api-token-file (on loopback everything is open)") }
        return .open
    }
}
