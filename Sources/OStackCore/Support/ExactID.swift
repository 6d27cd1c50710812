/// A record id compared as its UTF-8 bytes. Swift's `String ==` is canonical equivalence: two ids
/// that differ only in Unicode normalisation (NFC `é` against `e` + U+0301) are equal strings, but
/// two records to the server and to the mirror, whose keys are bytes. Where a set or dictionary of
/// ids decides what is deleted or adopted, the ids are these.
struct ExactID: Hashable, Sendable {
    let text: String

    init(_ text: String) { self.text = text }

    static func == (lhs: ExactID, rhs: ExactID) -> Bool { lhs.text.utf8.elementsEqual(rhs.text.utf8) }

    func hash(into hasher: inout Hasher) {
        var text = text
        text.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }
}
