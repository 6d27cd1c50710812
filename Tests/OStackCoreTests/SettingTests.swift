import OStackCore
import OStackTestSupport
import Testing

@Suite struct SettingTests {
    @Test(arguments: [("90", 90.0), ("90s", 90), ("15m", 900), ("12h", 43_200), ("1d", 86_400), ("0.5h", 1800)])
    func durationsParse(text: String, seconds: Double) {
        #expect(Setting.duration(text) == seconds)
    }

    @Test(arguments: ["", "0", "-5m", "abc", "5x", "31d", "m"])
    func badDurationsAreRefused(text: String) {
        #expect(Setting.duration(text) == nil)
    }

    @Test func setGetAndResetAreValidated() throws {
        let home = TemporaryDirectory()
        let store = ConfigurationStore(layout: FileLayout(environment: ["OSTACK_HOME": home.path], userID: 1))
        #expect(try store.value(of: "agent.idle-timeout") == ("15m", true))
        try store.set("agent.idle-timeout", to: "5m")
        #expect(try store.value(of: "agent.idle-timeout") == ("5m", false))
        #expect(throws: OStackError.self) { try store.set("agent.idle-timeout", to: "soon") }
        #expect(throws: OStackError.self) { try store.set("no.such.key", to: "1") }
        #expect(throws: OStackError.self) { try store.set("keyring.backend", to: "plaintext") }
        try store.set("agent.idle-timeout", to: nil)
        #expect(try store.value(of: "agent.idle-timeout").isDefault)
    }
}
