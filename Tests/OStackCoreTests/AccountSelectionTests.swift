import OStackCore
import OStackTestSupport
import Testing

@Suite struct AccountSelectionTests {
    let work: Account
    let workshop: Account
    let home: Account
    let selection: AccountSelection

    init() throws {
        work = try AccountRegistryTests.makeAccount("work", user: "u1")
        workshop = try AccountRegistryTests.makeAccount("workshop", user: "u2")
        home = try AccountRegistryTests.makeAccount("home", user: "u3", server: "other.example:8443")
        selection = AccountSelection(accounts: [work, workshop, home])
    }

    @Test func flagBeatsEnvironmentBeatsDefault() throws {
        let byFlag = try selection.select(flag: "home", environment: "work", defaultAccount: workshop.id)
        #expect(byFlag.account == home && byFlag.source == .flag)
        let byEnv = try selection.select(flag: nil, environment: "work", defaultAccount: workshop.id)
        #expect(byEnv.account == work && byEnv.source == .env)
        let byDefault = try selection.select(flag: nil, environment: "", defaultAccount: workshop.id)
        #expect(byDefault.account == workshop && byDefault.source == .default)
    }

    @Test func nothingSelectedIsAClearError() {
        let error = #expect(throws: OStackError.self) {
            try selection.select(flag: nil, environment: nil, defaultAccount: nil)
        }
        #expect(error?.code == .noAccount)
    }

    @Test func referencesResolveByIDAliasEmailAndPrefix() throws {
        #expect(try selection.resolve(home.id.rawValue) == home)
        #expect(try selection.resolve("work") == work)  // exact alias wins over prefix ambiguity
        #expect(try selection.resolve("home@example.com@other.example:8443") == home)
        #expect(try selection.resolve("HOME@example.com") == home)  // a unique e-mail alone
        #expect(try selection.resolve("worksh") == workshop)
        #expect(try selection.resolve("ho") == home)
    }

    /// OSTACK_ACCOUNT outlives the accounts it was set for: once `alice` is removed, `alice` must not
    /// come to mean `alice-work`. A prefix there is refused, naming the account it would have picked;
    /// `--account` (typed now) still takes one.
    @Test func theEnvironmentNamesAnAccountExactly() throws {
        let refused = #expect(throws: OStackError.self) {
            try selection.select(flag: nil, environment: "worksh", defaultAccount: work.id)
        }
        #expect(refused?.code == .unknownAccount)
        #expect(refused?.context.suggestion?.rendered(spellingCommands: { "\($0)" }).contains("OSTACK_ACCOUNT") == true)
        #expect(refused?.context.suggestion?.rendered(spellingCommands: { "\($0)" }).contains("workshop") == true)
        #expect(try selection.select(flag: "worksh", environment: "home", defaultAccount: work.id).account == workshop)
        #expect(try selection.select(flag: nil, environment: "workshop", defaultAccount: work.id).account == workshop)
        #expect(try selection.select(flag: nil, environment: home.id.rawValue, defaultAccount: nil).account == home)
        #expect(try selection.select(flag: nil, environment: "HOME@example.com", defaultAccount: nil).account == home)
        let exact = #expect(throws: OStackError.self) { try selection.resolve("ho", exactFor: "removal") }
        #expect(exact?.code == .unknownAccount)
        #expect(try selection.resolve("ho") == home)
    }

    @Test func ambiguousAndUnknownReferencesAreRefused() {
        let ambiguous = #expect(throws: OStackError.self) { try selection.resolve("wor") }
        #expect(ambiguous?.code == .ambiguousAccount)
        let unknown = #expect(throws: OStackError.self) { try selection.resolve("nobody\u{1b}[31m") }
        #expect(unknown?.code == .unknownAccount)
        #expect(unknown?.context.account?.contains("\u{1b}") == false)
    }
}

@Suite struct ConfigurationStoreTests {
    @Test func roundTripsTheDefaultAccount() throws {
        let home = TemporaryDirectory()
        let store = ConfigurationStore(layout: FileLayout(environment: ["OSTACK_HOME": home.path], userID: 1))
        #expect(try store.load().defaultAccount == nil)
        let id = try #require(AccountID(rawValue: "crm.example.com::u1"))
        try store.update { $0.defaultAccount = id }
        #expect(try store.load().defaultAccount == id)
    }
}
