import KeyringKit
import OStackCore
import SodiumKit
import Testing

@Suite struct KeyringFormatTests {
    let keyring = InMemoryKeyring()
    var secrets: KeyringSecretStore { KeyringSecretStore(keyring: keyring) }
    let namespaces = KeyringNamespaces(prefix: "t")
    let account = AccountID(rawValue: "crm.example.com::u1")!

    /// Fixture of the older format: a v0 db-key stored as hex text.
    func writeV0Fixture() throws -> [UInt8] {
        let raw: [UInt8] = (0..<32).map { UInt8($0 * 7 % 256) }
        let hex = Array(
            raw.map { byte -> String in
                let digits = Array("0123456789abcdef")
                return String([digits[Int(byte >> 4)], digits[Int(byte & 0xF)]])
            }.joined().utf8)
        var key = namespaces.key(account, .dbKey)
        key.version = 0
        try secrets.write(SecretBytes(copying: hex), for: key)
        return raw
    }

    @Test func upgradesOlderItemsAndDeletesThemAfterVerifying() throws {
        let raw = try writeV0Fixture()
        let upgraded = try KeyringFormat(secrets: secrets).upgrade(namespace: namespaces.account(account))
        #expect(upgraded == 1)
        let items = try secrets.list(namespace: namespaces.account(account))
        #expect(items.map(\.version) == [1])
        #expect(try secrets.read(namespaces.key(account, .dbKey))?.withUnsafeBytes { Array($0) } == raw)
        #expect(try KeyringFormat(secrets: secrets).upgrade(namespace: namespaces.account(account)) == 0)  // idempotent
    }

    @Test func readingAMissingItemUpgradesLazily() throws {
        let raw = try writeV0Fixture()
        #expect(try secrets.readUpgrading(namespaces.key(account, .dbKey))?.withUnsafeBytes { Array($0) } == raw)
        #expect(try secrets.list(namespace: namespaces.account(account)).map(\.version) == [1])
    }

    @Test func anInterruptedUpgradeIsFinished() throws {
        let raw = try writeV0Fixture()
        // A previous run copied the item but died before deleting the old one.
        try secrets.write(SecretBytes(copying: raw), for: namespaces.key(account, .dbKey))
        #expect(try KeyringFormat(secrets: secrets).upgrade(namespace: namespaces.account(account)) == 1)
        #expect(try secrets.list(namespace: namespaces.account(account)).count == 1)
    }

    @Test func surprisesStopTheUpgradeAndKeepTheOldItem() throws {
        var key = namespaces.key(account, .dbKey)
        key.version = 0
        try secrets.write(SecretBytes(copying: Array("not hex!".utf8)), for: key)
        #expect(throws: OStackError.self) {
            try KeyringFormat(secrets: secrets).upgrade(namespace: namespaces.account(account))
        }
        #expect(try secrets.read(key) != nil)
        #expect(try secrets.read(namespaces.key(account, .dbKey)) == nil)
    }
}
