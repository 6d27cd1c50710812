import Glibc
import OStackCLI
import OStackTestSupport
import Testing

/// Checks of the built `ostack` executable itself.
@Suite struct BinaryTests {
    @Test func versionPrintsTheVersion() throws {
        let result = try runProcess(executable: OStackBinary.path, arguments: ["--version"])
        #expect(result.status == 0)
        #expect(result.stdout.trimmingSuffixNewlines() == OStackVersion.current)
    }

    @Test func helpDescribesTheTool() throws {
        let result = try runProcess(executable: OStackBinary.path, arguments: ["--help"])
        #expect(result.status == 0)
        #expect(result.stdout.contains("USAGE: ostack"))
        #expect(result.stdout.contains("--version"))
    }

    @Test func unknownFlagIsAUsageError() throws {
        let result = try runProcess(executable: OStackBinary.path, arguments: ["--no-such-flag"])
        #expect(result.status == 64)
    }

    /// SQLCipher and plain SQLite export the same symbols; with both loaded the first wins and
    /// `PRAGMA key` can be silently ignored. The binary must link SQLCipher and never libsqlite3.
    @Test func linksTheRightLibraries() throws {
        let result = try runProcess(executable: "/usr/bin/ldd", arguments: [OStackBinary.path])
        #expect(result.status == 0)
        for library in ["libsqlcipher", "libsecret-1", "libsodium", "libcurl"] {
            #expect(result.stdout.contains(library), "ostack does not link \(library)")
        }
        #expect(!result.stdout.contains("libsqlite3"), "ostack links libsqlite3 next to SQLCipher")
    }
}

extension String {
    func trimmingSuffixNewlines() -> String {
        var copy = self
        while copy.hasSuffix("\n") { copy.removeLast() }
        return copy
    }
}
