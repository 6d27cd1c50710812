import FoundationEssentials
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

    /// The hand parser gives exactly the dates Foundation's ISO 8601 parser gives, and leaves every
    /// other spelling (fractions, offsets, impossible dates) to it.
    @Test(arguments: [
        "2026-11-23T01:46:44Z", "1970-01-01T00:00:00Z", "2024-02-29T23:59:59Z", "2000-12-31T00:00:00Z",
        "2026-11-23T01:46:44.305Z", "2026-11-23T02:46:44+01:00", "2025-02-29T00:00:00Z", "2026-02-30T00:00:00Z",
        "2026-13-01T00:00:00Z", "2026-11-23T24:00:00Z", "2026-11-23 01:46:44Z", "2026-11-23T01:46:4aZ", "", "soon",
    ])
    func parsedTimestampsMatchFoundation(_ text: String) {
        #expect(Timestamp.parseISO8601(text) == (try? Date(text, strategy: .iso8601)))
    }

    @Test func registryDatesDecodeAsWithTheISO8601Strategy() throws {
        struct Stamped: Codable, Equatable { var at: Date }
        let json = Data(#"{"at":"2026-11-23T01:46:44Z"}"#.utf8)
        let standard = JSONDecoder()
        standard.dateDecodingStrategy = .iso8601
        let fast = JSONDecoder()
        fast.dateDecodingStrategy = Timestamp.decodingStrategy
        #expect(try fast.decode(Stamped.self, from: json) == standard.decode(Stamped.self, from: json))
        #expect(throws: DecodingError.self) { try fast.decode(Stamped.self, from: Data(#"{"at":"soon"}"#.utf8)) }
    }

    /// The spellings a server's `created_at` comes in parse to a time (a lost create's lookup
    /// needs it): milliseconds, an offset, none.
    @Test(arguments: ["2026-11-25T03:12:47.305Z", "2026-11-25T03:12:47Z", "2026-11-25T03:12:47.305+00:00"])
    func serverTimestampsParse(_ text: String) throws {
        let parsed = try #require(Timestamp.parseISO8601(text))
        #expect(abs(parsed.timeIntervalSince1970 - 1_795_576_367) < 1)
    }
}
