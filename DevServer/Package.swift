// swift-tools-version: 6.0
//
// ostack-devserver: an ObjectStack-compatible HTTP server for ostack's tests, demo and benchmarks.
// Its own package so that SwiftNIO is never linked into `ostack` (docs/decisions/0001).
import PackageDescription

let package = Package(
    name: "DevServer",
    products: [
        .executable(name: "ostack-devserver", targets: ["ostack-devserver"])
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2")
    ],
    targets: [
        // The data engine: JSON, object metadata, records, filters, validation, batches. No NIO.
        .target(name: "DevServerCore"),
        // HTTP, routing, auth and sessions, idempotency, fault injection, the control API.
        .target(
            name: "DevServer",
            dependencies: [
                "DevServerCore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]),
        .executableTarget(name: "ostack-devserver", dependencies: ["DevServer", "DevServerCore"]),
        .testTarget(name: "DevServerCoreTests", dependencies: ["DevServerCore"]),
    ],
    swiftLanguageModes: [.v6]
)
