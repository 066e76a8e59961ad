// swift-tools-version: 6.0
import PackageDescription

let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

/// The audit's hot path (every message framed and classified) and the capture reader's (every packet reassembled): in
/// release builds, no dynamic exclusivity checks on their class properties (they were an eighth of the audit's time,
/// measured with perf on AuditBench, and a twentieth of the reader's). Debug builds and the tests keep them.
let hotPathSettings: [SwiftSetting] =
    strictSettings + [
        .unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))
    ]

let nio: [Target.Dependency] = [
    .product(name: "NIOCore", package: "swift-nio"),
    .product(name: "NIOPosix", package: "swift-nio"),
]

let package = Package(
    name: "chaos",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "chaos", targets: ["chaos"]),
        .executable(name: "chaos-bench", targets: ["ChaosBench"]),
        .executable(name: "chaos-fuzz", targets: ["ChaosFuzz"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.2.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-protobuf.git", from: "1.39.0"),
        .package(url: "https://github.com/grpc/grpc-swift-2.git", from: "2.4.3"),
        .package(url: "https://github.com/grpc/grpc-swift-nio-transport.git", from: "2.9.2"),
        .package(url: "https://github.com/grpc/grpc-swift-protobuf.git", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
    ],
    targets: [
        .target(
            name: "ChaosCore",
            dependencies: [.product(name: "Yams", package: "Yams")],
            swiftSettings: strictSettings
        ),
        .target(name: "CChaosEpoll"),
        .target(name: "CChaosClock"),
        .target(
            name: "ChaosProtocols",
            dependencies: [
                "ChaosCore", "CZlib", .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            swiftSettings: hotPathSettings
        ),
        .target(
            name: "ChaosTLS",
            dependencies: [
                "ChaosCore", .product(name: "NIOSSL", package: "swift-nio-ssl"), .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ] + nio,
            swiftSettings: strictSettings
        ),
        .target(
            name: "ChaosTLSDecryption",
            dependencies: [
                "ChaosCore", .product(name: "Crypto", package: "swift-crypto"),
                // AES's block function and ChaCha20 for QUIC's header protection.
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: strictSettings
        ),
        .target(
            name: "ChaosProxy",
            dependencies: [
                "ChaosCore", "ChaosProtocols", "ChaosTLS", "CChaosEpoll", .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ] + nio,
            swiftSettings: strictSettings
        ),
        .target(
            name: "ChaosControl",
            dependencies: [
                "ChaosCore", "ChaosProtocols", "ChaosProxy", .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ] + nio,
            swiftSettings: strictSettings
        ),
        .systemLibrary(
            name: "CZlib",
            pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"])]
        ),
        .target(
            name: "ChaosAudit",
            dependencies: ["ChaosCore", "ChaosProtocols", .product(name: "Histogram", package: "hdrhistogram-swift")],
            swiftSettings: hotPathSettings
        ),
        .target(
            name: "ChaosReport",
            dependencies: ["ChaosCore", "ChaosAudit", "ChaosProtocols"],
            swiftSettings: strictSettings
        ),
        .systemLibrary(
            name: "CPcap",
            pkgConfig: "libpcap",
            providers: [.apt(["libpcap-dev"])]
        ),
        .target(
            name: "ChaosCapture",
            dependencies: ["ChaosCore", "CPcap", "ChaosTLSDecryption"],
            swiftSettings: hotPathSettings
        ),
        .target(
            name: "ChaosDemo",
            dependencies: [
                "ChaosCore", .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                // The POSIX transport only: the umbrella product adds Network.framework's, which Linux compiles for nothing.
                .product(name: "GRPCNIOTransportHTTP2Posix", package: "grpc-swift-nio-transport"),
                .product(name: "GRPCProtobuf", package: "grpc-swift-protobuf"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ] + nio,
            swiftSettings: strictSettings
        ),
        .target(
            name: "ChaosRunner",
            dependencies: [
                "ChaosCore", "CChaosClock", "ChaosProtocols", "ChaosTLS", "ChaosProxy", "ChaosControl", "ChaosAudit", "ChaosReport", "ChaosCapture",
                "ChaosTLSDecryption",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Crypto", package: "swift-crypto"),
            ] + nio,
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "chaos",
            dependencies: [
                "ChaosCore", "ChaosProxy", "ChaosControl", "ChaosRunner", "ChaosDemo", "ChaosAudit", "ChaosReport", "ChaosTLSDecryption",
                "ChaosCapture", "ChaosProtocols", "ChaosTLS",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ] + nio,
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "ChaosFuzz",
            dependencies: ["ChaosCore", "ChaosAudit", "ChaosCapture", "ChaosProtocols", "ChaosTLS", "ChaosTLSDecryption"],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "ChaosBench",
            dependencies: nio,
            path: "Benchmarks/ChaosBench",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "AuditBench",
            dependencies: ["ChaosCore", "ChaosAudit", "ChaosProtocols"],
            path: "Benchmarks/AuditBench",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "CaptureBench",
            dependencies: ["ChaosCore", "ChaosCapture", "ChaosAudit", "CPcap"],
            path: "Benchmarks/CaptureBench",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "TLSCaptureBench",
            dependencies: [
                "ChaosCore", "ChaosCapture", "ChaosAudit", "ChaosTLSDecryption",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            path: "Benchmarks/TLSCaptureBench",
            swiftSettings: strictSettings
        ),
        .testTarget(name: "ChaosCoreTests", dependencies: ["ChaosCore", "ChaosProtocols"], swiftSettings: strictSettings),
        .testTarget(
            name: "ChaosProtocolsTests",
            dependencies: [
                "ChaosCore", "ChaosProtocols", .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "ChaosProxyTests",
            dependencies: [
                "ChaosCore", "ChaosProxy", "ChaosControl", "ChaosProtocols", "ChaosAudit",
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ] + nio,
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "ChaosTLSTests",
            dependencies: [
                "ChaosCore", "ChaosTLS", .product(name: "NIOSSL", package: "swift-nio-ssl"), .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ] + nio,
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "ChaosAuditTests",
            dependencies: [
                "ChaosCore", "ChaosAudit", "ChaosProtocols", .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "ChaosTLSDecryptionTests",
            dependencies: ["ChaosCore", "ChaosTLSDecryption", "ChaosCapture", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "ChaosReportTests",
            dependencies: ["ChaosCore", "ChaosAudit", "ChaosReport", "ChaosProtocols"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "ChaosCaptureTests",
            dependencies: ["ChaosCore", "ChaosCapture", "ChaosAudit"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "ChaosDemoTests",
            dependencies: ["ChaosCore", "ChaosDemo", .product(name: "NIOEmbedded", package: "swift-nio")] + nio,
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "ChaosRunnerTests",
            dependencies: ["ChaosCore", "ChaosRunner", "ChaosAudit", "ChaosReport", "ChaosControl", "ChaosProxy", "ChaosProtocols"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "ChaosEndToEndTests",
            dependencies: ["ChaosCore"] + nio,
            swiftSettings: strictSettings
        ),
    ]
)
