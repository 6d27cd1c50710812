import Testing

@testable import OStackCore

@Suite struct MirrorBatchTests {
    /// Entries in the order `forEach` gives them.
    static func entries(_ batch: MirrorBatch) -> [([UInt8], Int64)] {
        var entries: [([UInt8], Int64)] = []
        batch.forEach { key, rid in entries.append((Array(key), rid)) }
        return entries
    }

    /// A batch sorted stretch by stretch while it grows (`sortTail`, as the pull does while it waits
    /// for a page) and then as a whole comes out in the same order as one sorted once, which is
    /// entry order: keys as SQLite orders BLOBs, then rids.
    @Test(arguments: [1, 2, 7, 50])
    func sortingStretchesFirstChangesNothing(stretches: Int) {
        var generator = SystemRandomNumberGenerator()
        // Short keys sharing prefixes (ties on the eight-byte prefix, one key a prefix of another),
        // repeated keys under other rids, and now and then the very same entry twice.
        let alphabet: [UInt8] = [0, 1, 0x41, 0x42, 0x7F, 0x80, 0xFF]
        var input: [([UInt8], Int64)] = []
        for _ in 0..<600 {
            if let earlier = input.randomElement(using: &generator), Int.random(in: 0..<10, using: &generator) == 0 {
                input.append(Int.random(in: 0..<2, using: &generator) == 0 ? earlier : (earlier.0, Int64.random(in: 1...40, using: &generator)))
                continue
            }
            let prefix: [UInt8] = Int.random(in: 0..<2, using: &generator) == 0 ? Array("status\0op".utf8) : []
            let key = prefix + (0..<Int.random(in: 0...10, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! }
            input.append((key, Int64.random(in: 1...40, using: &generator)))
        }
        var once = MirrorBatch()
        var stretched = MirrorBatch()
        let size = input.count / stretches + 1
        for (index, entry) in input.enumerated() {
            once.append(entry.0, rid: entry.1)
            stretched.append(entry.0, rid: entry.1)
            if (index + 1) % size == 0 { stretched.sortTail() }
        }
        stretched.sortTail()
        once.sort()
        stretched.sort()
        let expected = input.sorted { a, b in
            a.0.lexicographicallyPrecedes(b.0) || (a.0 == b.0 && a.1 < b.1)
        }
        #expect(Self.entries(once).elementsEqual(expected) { $0.0 == $1.0 && $0.1 == $1.1 })
        #expect(Self.entries(stretched).elementsEqual(expected) { $0.0 == $1.0 && $0.1 == $1.1 })
    }

    /// After a filter drops items, the next stretch is every item appended since, sorted among
    /// themselves (the sorted part shrinks with the filter).
    @Test func aStretchAfterAFilterStartsWhereTheFilterLeftOff() {
        var batch = MirrorBatch()
        for rid in (1...20).reversed() { batch.append(Array("k\(rid % 7)".utf8), rid: Int64(rid)) }
        batch.sortTail()
        batch.filter { $0.rid % 3 != 0 }
        #expect(batch.count == 14)
        for rid in (21...30).reversed() { batch.append(Array("j\(rid)".utf8), rid: Int64(rid)) }
        batch.sortTail()
        let tail = batch.items[14...].map { item in (batch.withKey(item) { Array($0) }, item.rid) }
        for (a, b) in zip(tail, tail.dropFirst()) {
            #expect(a.0.lexicographicallyPrecedes(b.0) || (a.0 == b.0 && a.1 < b.1))
        }
        batch.sort()
        let entries = Self.entries(batch)
        #expect(entries.count == 24)
        for (a, b) in zip(entries, entries.dropFirst()) {
            #expect(a.0.lexicographicallyPrecedes(b.0) || (a.0 == b.0 && a.1 < b.1))
        }
    }
}
