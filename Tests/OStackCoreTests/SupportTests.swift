@testable import OStackCore
import Testing

/// The shared helpers in `Support/`: random identifiers and timestamps keep their exact formats.
@Suite struct SupportTests {
    @Test func accountDirectoryNamesAreAcctAnd16HexDigits() {
        let name = LoginService.newDirectoryName()
        #expect(name.hasPrefix("acct-") && name.count == 21)
        #expect(name.dropFirst(5).allSatisfy { RandomID.hexDigits.contains($0) })
        #expect(LoginService.newDirectoryName() != name)
    }

    @Test func randomIDsUseEverySymbolOfTheirAlphabetAndNothingElse() {
        let alphabet = "abcdefghjkmnpqrstuvwxyz23456789"  // 31 symbols: some bytes are drawn again
        let text = RandomID.make(prefix: "r", count: 4000, alphabet: alphabet)
        #expect(text.first == "r" && text.count == 4001)
        #expect(Set(text.dropFirst()) == Set(alphabet))
        #expect(RandomID.make(count: 8, alphabet: alphabet).count == 8)
    }

    @Test func timestampsAreUTCISO8601() {
        let time = 1_795_398_404.305
        #expect(Timestamp.iso8601(secondsSince1970: time, milliseconds: true) == "2026-11-23T01:46:44.305Z")
        #expect(Timestamp.iso8601(secondsSince1970: time, milliseconds: false) == "2026-11-23T01:46:44Z")
        #expect(Timestamp.iso8601(secondsSince1970: 0, milliseconds: true) == "1970-01-01T00:00:00.000Z")
    }
}
