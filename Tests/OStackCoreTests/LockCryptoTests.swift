@testable import OStackCore
import OStackTestSupport
import SodiumKit
import Testing

@Suite struct LockCryptoTests {
    let account = AccountID(rawValue: "crm.example.com::u1")!
    let fast = Argon2id.Parameters(opsLimit: 1, memLimit: 8192, salt: Argon2id.freshSalt())
    func secret(_ text: String) -> SecretBytes { SecretBytes(copying: Array(text.utf8)) }

    @Test(arguments: ["1111", "1234", "4321", "0000", "2580", "123", String(repeating: "x", count: 65)])
    func trivialOrMalformedPINsAreRefused(pin: String) {
        #expect(throws: OStackError.self) { try PINPolicy.validate(PIN(secret(pin))) }
    }

    @Test(arguments: ["7319", "480216", "correct horse", "12345678x"])
    func reasonablePINsAreAccepted(pin: String) throws {
        try PINPolicy.validate(PIN(secret(pin)))
    }

    /// PIN-7: one passphrase in two Unicode normalisation forms is one PIN; bytes that are not
    /// UTF-8 and ASCII are kept as typed.
    @Test func aPINIsComposedBeforeItSealsAndTriedAsTypedToo() throws {
        let composed = "caf\u{E9} au lait", decomposed = "cafe\u{301} au lait"
        #expect(Array(composed.utf8) != Array(decomposed.utf8))
        #expect(PIN(secret(decomposed)).composed == PIN(secret(composed)))
        #expect(PIN(secret(composed)).composed == PIN(secret(composed)))
        #expect(PIN(secret(decomposed)).unlockForms == [PIN(secret(composed)), PIN(secret(decomposed))])
        #expect(PIN(secret(composed)).unlockForms == [PIN(secret(composed))])
        #expect(PIN(secret("7319")).unlockForms == [PIN(secret("7319"))])
        let latin1 = PIN(SecretBytes(copying: [0x63, 0x61, 0x66, 0xE9, 0x31]))  // not UTF-8
        #expect(latin1.composed == latin1 && latin1.unlockForms.count == 1)
        // An envelope sealed before PINs were composed, from decomposed input, still opens when the
        // PIN is typed that way again: with the second form an unlock tries.
        let dek = AccountDataKey(SecretBytes(randomCount: 32))
        let ring = PINRing.generate()
        let legacy = try KeyEnvelope.seal(
            dek, secret: PIN(secret(decomposed)), ringKey: ring.ringKey, accountID: account, kdf: fast)
        let opened = PIN(secret(decomposed)).unlockForms.compactMap {
            try? legacy.open(secret: $0, ringKey: ring.ringKey, accountID: account)
        }
        #expect(opened == [dek])
    }

    @Test func ringRoundTripsWithItsCounter() throws {
        var ring = PINRing.generate()
        ring.failures = 3
        let decoded = try PINRing(decoding: ring.encoded())
        #expect(decoded.ringKey == ring.ringKey)
        #expect(decoded.failures == 3)
        #expect(decoded.attemptsLeft == 2)
        #expect(throws: OStackError.self) { try PINRing(decoding: SecretBytes(zeroedCount: 10)) }
    }

    @Test func envelopeOpensOnlyWithPINRingAndAccount() throws {
        let dek = AccountDataKey(SecretBytes(randomCount: 32))
        let ring = PINRing.generate()
        let envelope = try KeyEnvelope.seal(
            dek, secret: PIN(secret("7319")), ringKey: ring.ringKey, accountID: account, kdf: fast)
        #expect(try envelope.open(secret: PIN(secret("7319")), ringKey: ring.ringKey, accountID: account) == dek)
        let wrongPIN = #expect(throws: OStackError.self) {
            try envelope.open(secret: PIN(secret("7318")), ringKey: ring.ringKey, accountID: account)
        }
        #expect(wrongPIN?.code == .wrongPIN)
        #expect(throws: OStackError.self) {
            try envelope.open(
                secret: PIN(secret("7319")), ringKey: RingKey(SecretBytes(randomCount: 32)), accountID: account)
        }
        #expect(throws: OStackError.self) {
            try envelope.open(
                secret: PIN(secret("7319")), ringKey: ring.ringKey, accountID: AccountID(rawValue: "other::u1")!)
        }
        var weakened = envelope
        weakened.kdf.opsLimit = 2  // parameters are bound as associated data
        #expect(throws: OStackError.self) {
            try weakened.open(secret: PIN(secret("7319")), ringKey: ring.ringKey, accountID: account)
        }
    }

    @Test func resealingUsesFreshSaltAndNonce() throws {
        let dek = AccountDataKey(SecretBytes(randomCount: 32))
        let ring = PINRing.generate()
        let a = try KeyEnvelope.seal(
            dek, secret: PIN(secret("7319")), ringKey: ring.ringKey, accountID: account, kdf: fast)
        let freshParameters = Argon2id.Parameters(opsLimit: 1, memLimit: 8192, salt: Argon2id.freshSalt())
        let b = try KeyEnvelope.seal(
            dek, secret: PIN(secret("7319")), ringKey: ring.ringKey, accountID: account, kdf: freshParameters)
        #expect(a.nonce != b.nonce && a.kdf.salt != b.kdf.salt && a.ciphertext != b.ciphertext)
    }

    @Test func envelopeFilesArePrivateAndRoundTrip() throws {
        let directory = TemporaryDirectory()
        let envelope = try KeyEnvelope.seal(
            AccountDataKey(SecretBytes(randomCount: 32)), secret: RecoveryKey(secret("x")),
            ringKey: RingKey(SecretBytes(randomCount: 32)),
            accountID: account, kdf: fast)
        try envelope.write(to: directory.appending("pin.env"))
        #expect(try KeyEnvelope.read(from: directory.appending("pin.env")) == envelope)
        #expect(try KeyEnvelope.read(from: directory.appending("missing.env")) == nil)
    }

    @Test func recoveryKeysFormatAndParse() throws {
        let key = RecoveryKey.generate()
        let text = RecoveryKey.format(key).withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        #expect(text.count == 39)
        #expect(text.split(separator: "-").map(\.count) == Array(repeating: 4, count: 8))
        #expect(try RecoveryKey.parse(secret(text.lowercased().replacing("-", with: " "))) == key)
        #expect(throws: OStackError.self) { try RecoveryKey.parse(secret("ABCD-EFGH")) }
        #expect(throws: OStackError.self) { try RecoveryKey.parse(secret(String(repeating: "1", count: 32))) }
    }
}
