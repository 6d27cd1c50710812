/// The pages of a list walked by offset, remembered by a fingerprint of their records' ids: a page
/// the server sent before — the one just before, or any earlier one (a server alternating two pages)
/// — is caught, in 8 bytes a page.
public struct SeenPages {
    private var fingerprints = Set<Int>()

    public init() {}

    /// False when a page with these ids, in this order, came before.
    public mutating func insert<S: Sequence<String>>(_ ids: S) -> Bool {
        var hasher = Hasher()
        var count = 0
        for id in ids {
            hasher.combine(id)
            count += 1
        }
        hasher.combine(count)
        return fingerprints.insert(hasher.finalize()).inserted
    }
}
