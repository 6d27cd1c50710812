import OStackCore
import OStackTestSupport
import PlatformKit
import Testing

@Suite struct FileLayoutTests {
    @Test func ostackHomePutsEverythingUnderOneRoot() {
        let layout = FileLayout(environment: ["OSTACK_HOME": "/tmp/x/", "HOME": "/home/u"], userID: 1000)
        #expect(layout.configDirectory == "/tmp/x/config")
        #expect(layout.dataDirectory == "/tmp/x/data")
        #expect(layout.stateDirectory == "/tmp/x/state")
        #expect(layout.runtimeDirectory == "/tmp/x/run")
        #expect(layout.registryFile == "/tmp/x/data/accounts.json")
        // The claim locks are the user's, not the home's: every home meets there (HomeClaim.lock).
        #expect(layout.claimsDirectory == "/tmp/ostack-claims-1000")
        let other = FileLayout(
            environment: ["OSTACK_HOME": "/tmp/y", "XDG_RUNTIME_DIR": "/run/user/1000/"], userID: 1000)
        #expect(other.claimsDirectory == "/run/user/1000/ostack-claims")
        #expect(FileLayout(environment: ["XDG_RUNTIME_DIR": "/run/user/1000"], userID: 1000).claimsDirectory
            == other.claimsDirectory)
    }

    @Test func xdgVariablesAreHonoured() {
        let layout = FileLayout(
            environment: [
                "HOME": "/home/u", "XDG_CONFIG_HOME": "/c", "XDG_DATA_HOME": "/d/", "XDG_STATE_HOME": "/s",
                "XDG_RUNTIME_DIR": "/run/user/1000",
            ], userID: 1000)
        #expect(layout.configDirectory == "/c/ostack")
        #expect(layout.dataDirectory == "/d/ostack")
        #expect(layout.stateDirectory == "/s/ostack")
        #expect(layout.runtimeDirectory == "/run/user/1000/ostack")
    }

    @Test func defaultsFollowTheXDGSpecification() {
        let layout = FileLayout(environment: ["HOME": "/home/u"], userID: 1234)
        #expect(layout.configDirectory == "/home/u/.config/ostack")
        #expect(layout.dataDirectory == "/home/u/.local/share/ostack")
        #expect(layout.stateDirectory == "/home/u/.local/state/ostack")
        #expect(layout.runtimeDirectory == "/tmp/ostack-1234")
    }

    @Test func relativePathsAreIgnored() {
        let layout = FileLayout(
            environment: ["HOME": "/home/u", "XDG_DATA_HOME": "relative/dir", "OSTACK_HOME": "also/relative"],
            userID: 1)
        #expect(layout.dataDirectory == "/home/u/.local/share/ostack")
    }

    @Test func missingHomeFallsBackToThePasswordEntry() {
        let layout = FileLayout(environment: [:], userID: 1, homeDirectory: "/var/lib/u")
        #expect(layout.configDirectory == "/var/lib/u/.config/ostack")
    }

    @Test func directoriesAreCreatedPrivate() throws {
        let temp = TemporaryDirectory()
        let layout = FileLayout(environment: ["OSTACK_HOME": temp.appending("home")], userID: 1)
        try layout.createDirectories()
        for directory in [
            layout.configDirectory, layout.dataDirectory, layout.accountsDirectory, layout.stateDirectory,
            layout.locksDirectory,
        ] {
            #expect(SecureFileSystem.mode(of: directory) == 0o700, "\(directory)")
        }
    }
}
