// swift-tools-version: 6.0
//
// ostack — a multi-account ObjectStack client for the Linux terminal.
//
// Layers (dependencies point down only; see docs/architecture.md):
//   ostack → OStackCLI → OStackCore → *Kit wrappers → C system libraries / C shims
// The dev server lives in its own package (DevServer/) so that it can never be linked into
// `ostack` and its SwiftNIO build never slows the client's.
import PackageDescription

let package = Package(
    name: "ostack",
    products: [
        .executable(name: "ostack", targets: ["ostack"])
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2")
    ],
    targets: [
        // MARK: C system libraries (headers and link flags from pkg-config; apt names for hints)
        .systemLibrary(
            name: "CSQLCipher", pkgConfig: "sqlcipher", providers: [.apt(["libsqlcipher-dev"])]),
        .systemLibrary(
            name: "CSodium", pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"])]),
        .systemLibrary(
            name: "CLibsecret", pkgConfig: "libsecret-1", providers: [.apt(["libsecret-1-dev"])]),
        .systemLibrary(
            name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),

        // MARK: C shims, only where Swift cannot call the C API directly
        .target(name: "CCurlShims", dependencies: ["CCurl"]),
        .target(name: "CSecretShims", dependencies: ["CLibsecret"]),
        .target(name: "CPlatform"),

        // MARK: Platform wrappers: one Swift module per C library, C types never public
        .target(name: "SodiumKit", dependencies: ["CSodium"]),
        .target(name: "SQLCipherKit", dependencies: ["CSQLCipher", "SodiumKit", "PlatformKit"]),
        .target(name: "KeyringKit", dependencies: ["CLibsecret", "CSecretShims", "SodiumKit", "PlatformKit"]),
        .target(name: "CurlKit", dependencies: ["CCurl", "CCurlShims"]),
        .target(name: "PlatformKit", dependencies: ["CPlatform"]),

        // MARK: Core (no CLI, no C imports) and CLI
        .target(
            name: "OStackCore",
            dependencies: ["SodiumKit", "SQLCipherKit", "KeyringKit", "CurlKit", "PlatformKit"]),
        .target(
            name: "OStackCLI",
            dependencies: [
                "OStackCore", "SodiumKit", "PlatformKit", "KeyringKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]),
        .executableTarget(
            name: "ostack",
            dependencies: [
                "OStackCLI", "PlatformKit", .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]),

        // MARK: Tests (test support is never linked into `ostack`)
        .executableTarget(name: "keyring-probe", dependencies: ["KeyringKit", "SodiumKit"]),
        .executableTarget(
            name: "ostack-bench",
            dependencies: ["OStackCore", "SQLCipherKit", "SodiumKit", "CurlKit", "PlatformKit", "OStackTestSupport"]),
        .target(name: "OStackTestSupport", dependencies: ["PlatformKit", "CPlatform"]),
        .testTarget(name: "SodiumKitTests", dependencies: ["SodiumKit"]),
        .testTarget(name: "SQLCipherKitTests", dependencies: ["SQLCipherKit", "SodiumKit", "OStackTestSupport"]),
        .testTarget(
            name: "KeyringKitTests", dependencies: ["KeyringKit", "CSecretShims", "SodiumKit", "OStackTestSupport"],
            exclude: ["Fixtures"]),
        // Fixtures (Python helpers, data files) are read from the source tree by path, not bundled.
        .testTarget(name: "CurlKitTests", dependencies: ["CurlKit", "OStackTestSupport"], exclude: ["Fixtures"]),
        .testTarget(name: "PlatformKitTests", dependencies: ["PlatformKit", "OStackTestSupport"]),
        .testTarget(name: "EndToEndTests", dependencies: ["OStackTestSupport"], exclude: ["Fixtures"]),
        .testTarget(name: "DevServerContractTests", dependencies: ["CurlKit", "OStackTestSupport"]),
        .testTarget(
            name: "OStackCoreTests", dependencies: ["OStackCore", "KeyringKit", "PlatformKit", "OStackTestSupport"],
            exclude: ["Fixtures"]),
        .testTarget(name: "OStackCLITests", dependencies: ["OStackCLI", "OStackTestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
