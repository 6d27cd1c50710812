import OStackTestSupport
import Testing

@testable import OStackCore

/// `Puller.isEarlier`: a keyset page must not go back in time. Judged only between UTC ISO 8601
/// timestamps, fractions compared as decimals; any other spelling is never called earlier.
struct KeysetOrderTests {
    @Test(arguments: [
        ("2026-11-25T03:12:47.821Z", "2026-11-25T03:12:47.822Z", true),
        ("2026-11-25T03:12:47.822Z", "2026-11-25T03:12:47.822Z", false),
        ("2026-11-25T03:12:48Z", "2026-11-25T03:12:47.999Z", false),
        ("2026-11-25T03:12:47.9Z", "2026-11-25T03:12:47.85Z", false),
        ("2026-11-25T03:12:47.85Z", "2026-11-25T03:12:47.9Z", true),
        ("2026-11-25T03:12:47Z", "2026-11-25T03:12:47.001Z", true),
        ("2025-12-31T23:59:59.999Z", "2026-01-01T00:00:00.000Z", true),
        // Not judged: offsets, other spellings, garbage.
        ("2026-11-25T03:12:47.000+01:00", "2026-11-25T03:12:48.000Z", false),
        ("2026-11-25 03:12:47", "2026-11-25T03:12:48Z", false),
        ("12345", "2026-11-25T03:12:48Z", false),
        ("2026-11-25T03:12:4x.000Z", "2026-11-25T03:12:48Z", false),
        ("2026-11-25T03:12:47.Z", "2026-11-25T03:12:48Z", false),
    ])
    func earlierOnlyWhenBothAreTimestamps(_ version: String, _ current: String, _ earlier: Bool) {
        #expect(Puller.isEarlier(version, than: current) == earlier)
    }

    /// The byte comparison agrees with comparing the parts as text (the earlier implementation),
    /// on random stamps and near-stamps: fractions of every width, missing ones, wrong separators.
    @Test func theByteComparisonAgreesWithComparingTheParts() {
        func reference(_ version: String, _ current: String) -> Bool {
            func parts(_ text: String) -> (seconds: Substring, fraction: String)? {
                let bytes = Array(text.utf8)
                guard bytes.count >= 20, bytes.last == UInt8(ascii: "Z") else { return nil }
                let separators: [Int: Character] = [4: "-", 7: "-", 10: "T", 13: ":", 16: ":"]
                for (index, character) in text.prefix(19).enumerated() {
                    if let expected = separators[index] {
                        guard character == expected else { return nil }
                    } else {
                        guard character.isASCII, character.isNumber else { return nil }
                    }
                }
                let rest = text.dropFirst(19).dropLast()
                if !rest.isEmpty {
                    guard rest.first == ".", rest.count > 1, rest.dropFirst().allSatisfy({ $0.isASCII && $0.isNumber })
                    else { return nil }
                }
                return (text.prefix(19), String(rest.dropFirst()))
            }
            guard let a = parts(version), let b = parts(current) else { return false }
            if a.seconds != b.seconds { return a.seconds < b.seconds }
            let width = max(a.fraction.count, b.fraction.count)
            return a.fraction.padding(toLength: width) < b.fraction.padding(toLength: width)
        }
        var generator = SeededGenerator(seed: 42)
        func stamp() -> String {
            let second = ["2026-11-25T03:12:47", "2026-11-25T03:12:48", "2025-12-31T23:59:59", "2026-11-25 03:12:47",
                          "2026-11-25T03:1x:47"].randomElement(using: &generator)!
            let digits = Int.random(in: 0...5, using: &generator)
            let fraction = (0..<digits).map { _ in String(Int.random(in: 0...9, using: &generator)) }.joined()
            let dot = digits > 0 || Int.random(in: 0..<6, using: &generator) == 0 ? "." : ""
            return second + dot + fraction + (Int.random(in: 0..<12, using: &generator) == 0 ? "+01:00" : "Z")
        }
        for _ in 0..<5_000 {
            let (a, b) = (stamp(), stamp())
            #expect(Puller.isEarlier(a, than: b) == reference(a, b), "\(a) \(b)")
        }
    }

    /// The look-back's start: the cursor moved back, in the same UTC form; nothing for a cursor
    /// that is not a UTC timestamp (the pull then keeps the plain keyset).
    @Test(arguments: [
        ("2026-11-25T03:12:47.821Z", 30_000, "2026-11-25T03:12:17.821Z"),
        ("2026-01-01T00:00:10.005Z", 30_000, "2025-12-31T23:59:40.005Z"),
        ("2026-11-25T03:12:47Z", 1_500, "2026-11-25T03:12:45.500Z"),
        ("2026-11-25T03:12:47.000+01:00", 30_000, nil),
        ("v42", 30_000, nil),
        ("2026-11-25 03:12:47.821Z", 30_000, nil),  // a server comparing text would not agree
        ("2026-11-25T03:12:47.821Z", 0, nil),
    ] as [(String, Int64, String?)])
    func lookbackStartsBeforeTheCursor(_ cursor: String, _ milliseconds: Int64, _ start: String?) {
        #expect(Puller.lookbackStart(from: cursor, milliseconds: milliseconds) == start)
    }

    @Test func positionsCompareByStampThenId() {
        let at = (version: "2026-11-25T03:12:47.821Z", id: "tsk_b")
        #expect(Puller.isAtOrBefore(at, at))
        #expect(Puller.isAtOrBefore((at.version, "tsk_a"), at))
        #expect(!Puller.isAtOrBefore((at.version, "tsk_c"), at))
        #expect(Puller.isAtOrBefore(("2026-11-25T03:12:47.820Z", "tsk_z"), at))
        #expect(!Puller.isAtOrBefore(("2026-11-25T03:12:47.822Z", "tsk_a"), at))
        #expect(!Puller.isAtOrBefore(("v1", "tsk_a"), at))  // not comparable: the cursor moves
    }
}

extension String {
    fileprivate func padding(toLength width: Int) -> String { self + String(repeating: "0", count: width - count) }
}
