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
