import OStackTestSupport
import Testing

/// `ostack help environment`, a help topic that is not a command.
@Suite struct HelpTopicsTests {
    @Test func environmentListsEveryVariableOStackReads() throws {
        let result = try runProcess(executable: OStackBinary.path, arguments: ["help", "environment"])
        #expect(result.status == 0)
        #expect(result.stderr == "")
        for variable in [
            "OSTACK_ACCOUNT", "OSTACK_HOME", "XDG_CONFIG_HOME", "XDG_RUNTIME_DIR", "HOME", "OSTACK_KEYRING_BACKEND",
            "OSTACK_KEYRING_PREFIX", "OSTACK_KEYRING_TIMEOUT", "OSTACK_KEYRING_PASSPHRASE_FD", "OSTACK_PIN_KDF",
            "OSTACK_METADATA_TTL", "NO_COLOR", "TERM", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "LC_ALL", "LANG",
            "https_proxy", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY",
        ] {
            #expect(result.stdout.contains(variable), "\(variable) is missing")
        }
    }

    @Test func commandsStillGetTheirHelp() throws {
        let result = try runProcess(executable: OStackBinary.path, arguments: ["help", "status"])
        #expect(result.status == 0)
        #expect(result.stdout.contains("USAGE: ostack status"))
    }
}
