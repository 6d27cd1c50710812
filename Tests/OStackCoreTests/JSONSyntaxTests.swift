import Testing

@testable import OStackCore

/// The strict check a pulled record passes before it is stored (docs/sync.md, "Pull").
@Suite struct JSONSyntaxTests {
    func valid(_ text: String) -> Bool {
        Array(text.utf8).withUnsafeBytes { JSONSyntax.isValidObject($0) }
    }

    @Test func acceptsRecordsAsServersWriteThem() {
        #expect(valid(#"{"id":"r1","title":"a","amount":-12.5e3,"done":true,"x":null,"tags":["a",{"b":false}]}"#))
        #expect(valid(" {\"id\" : \"r\\u00e9\\n\\\"\" , \"n\": 0 } \n"))
        #expect(valid("{}"))
        #expect(valid(#"{"a":"\ud83d\ude00","n":{"x":1,"x":2}}"#))  // a pair; nested names are the value's business
        #expect(valid(#"{"big":179769313486231570000000000000000000000000000000000000000000000000000}"#))
    }

    @Test func refusesWhatWouldBeStoredAndThenUnreadable() {
        for text in [
            #"{"a":tru}"#, #"{"a":NaN}"#, #"{"a":Infinity}"#, #"{"a":1e400}"#, #"{"a":-1e309}"#, #"{"a":2.5e-835}"#,
            #"{"a":01}"#,
            #"{"a":1.}"#, #"{"a":.5}"#, #"{"a":+1}"#, #"{"a":"\x"}"#, "{\"a\":\"\u{1}\"}", #"{"a":"\u12"}"#,
            #"{"a":"\ud800"}"#, #"{"a":"\udc00x"}"#, #"{"a":"\ud800\u0041"}"#, #"{"id":"a","id":"b"}"#,
            #"{"i\u0064":"a"}"#, #"{"a":1,}"#, #"{"a" 1}"#, #"{"a":1} x"#, #"["not","an","object"]"#, #"{"a":"open}"#,
            "",
            "{\"a\":" + String(repeating: "[", count: 70) + String(repeating: "]", count: 70) + "}",
        ] {
            #expect(!valid(text), "\(text.prefix(40))")
        }
        let deepButAllowed = "{\"a\":" + String(repeating: "[", count: 60) + String(repeating: "]", count: 60) + "}"
        #expect(valid(deepButAllowed))
    }

    /// Strings are checked eight bytes at a time where nothing needs a look: a byte that does (a
    /// control character, a quote, a backslash, the lead or continuation of a UTF-8 sequence, a bad
    /// byte) is found at every offset of a long string, in each position of a word.
    @Test func aByteThatNeedsALookIsFoundAtEveryOffsetOfALongString() {
        let cases: [(inserted: [UInt8], valid: Bool)] = [
            ([0x01], false), ([0x1F], false), ([0x0A], false), ([0x7F], true), ([0x20], true), ([0x21], true),
            ([0x23], true), ([0x5B], true), ([0x5D], true), ([0x5C, 0x22], true), ([0x5C, 0x5C], true),
            ([0x5C, 0x71], false), (Array("\\u00e9".utf8), true), ([0xC3, 0xA9], true), ([0xC3], false),
            ([0xA9], false), ([0xE2, 0x80, 0xAE], true), ([0xF0, 0x9F, 0x98, 0x80], true), ([0xFF], false),
            ([0xC0, 0x80], false), ([0x22], false),  // a quote ends the string early
        ]
        for (inserted, expected) in cases {
            for offset in 0..<20 {
                for tail in [0, 1, 7, 8, 9, 23] {
                    let body =
                        Array(repeating: UInt8(ascii: "a"), count: offset) + inserted
                        + Array(repeating: UInt8(ascii: "z"), count: tail)
                    let bytes = Array(#"{"id":""#.utf8) + body + Array(#"","n":1}"#.utf8)
                    let result = bytes.withUnsafeBytes { JSONSyntax.isValidObject($0) }
                    #expect(result == expected, "\(inserted) at \(offset), \(tail) after")
                }
            }
        }
        // A string that ends exactly at a word's end, and one the body ends inside of.
        #expect(valid(#"{"id":"0123456789abcdef"}"#))
        #expect(!valid(#"{"id":"0123456789abcdef"#))
        #expect(!valid(#"{"id":"0123456789abcde"#))
    }

    /// Mutated records: the check never traps, and whatever it accepts, the decoder reads too.
    @Test func mutatedRecordsNeverTrapAndAcceptedOnesDecode() {
        var generator = WireFuzzTests.Generator(state: 11)
        let seeds = [
            #"{"id":"r1","title":"Write \"report\"","amount":10.5,"done":false,"due":"2026-01-01","tags":["a","b"]}"#,
            #"{"id":"x","n":[1,2.5e-3,-0,{"k":null}],"s":"\u00e9\t"}"#,
            #"{"id":"s","e":"\ud83d\ude00 \u00e9","o":{"k":1,"k":2}}"#,
        ].map { Array($0.utf8) }
        let alphabet = Array(#"{}[]",:0123456789eE+-.tfnulrsdDcu8\ "#.utf8) + [0, 0x1B, 0xFF]
        var accepted = 0
        for round in 0..<10_000 {
            var bytes = seeds[round % seeds.count]
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                let index = Int.random(in: 0..<bytes.count, using: &generator)
                switch Int.random(in: 0..<3, using: &generator) {
                case 0: bytes[index] = alphabet.randomElement(using: &generator)!
                case 1: bytes.remove(at: index)
                default: bytes.insert(alphabet.randomElement(using: &generator)!, at: index)
                }
                if bytes.isEmpty { bytes = [0x7B] }
            }
            if bytes.withUnsafeBytes({ JSONSyntax.isValidObject($0) }) {
                accepted += 1
                #expect(JSONValue.parse(bytes) != nil, "\(String(decoding: bytes, as: UTF8.self))")
            }
        }
        #expect(accepted > 0)
    }
}
