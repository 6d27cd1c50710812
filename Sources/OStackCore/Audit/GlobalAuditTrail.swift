import FoundationEssentials
import PlatformKit
import SodiumKit

/// The global trail (docs/audit.md, "Global trail"): events that outlive or precede an account — account removal,
/// keyring backend changes, sign-in failures for unknown accounts. JSON lines in
/// `audit-global.jsonl` (0600), chained with keyed BLAKE2b under a random key kept in the keyring,
/// which also anchors the head (`<prefix>:global`, kind `audit-anchor`: "keyhex|seq:machex").
///
/// Each home's trail has an anchor of its own: its item's `account` is `global:<trail id>`, the id
/// kept in `audit-global.id` beside the trail, made with the trail's key from a hash of the home's
/// data directory (links resolved). One shared item would have made every other home on the same
/// keyring prefix report its trail as changed. The id file lets a moved home find its anchor; with
/// it gone the anchor is looked for under the home's own hash, so deleting the trail and its id
/// file is still found (the anchor outlives them). A trail from before the id (the trail file
/// without an id file) keeps the item `global`.
public struct GlobalAuditTrail: Sendable {
    public let path: String
    let idPath: String
    let dataDirectory: String
    let secrets: any SecretStore
    let namespace: String

    public init(layout: FileLayout, secrets: any SecretStore, namespaces: KeyringNamespaces) {
        path = layout.dataDirectory + "/audit-global.jsonl"
        idPath = layout.dataDirectory + "/audit-global.id"
        dataDirectory = layout.dataDirectory
        self.secrets = secrets
        namespace = "\(namespaces.prefix):global"
    }

    /// The anchor item of this home's trail: the id file's; else, for a trail file without one,
    /// the item of a trail from before ids (`global`); else the one this home's hash names (where a
    /// new trail's anchor goes, and where a deleted trail's still is).
    func item() -> SecretKey? {
        if let bytes = try? SecureFileSystem.readFile(idPath, limit: 64) {
            let id = String(decoding: bytes.prefix { $0 != UInt8(ascii: "\n") }, as: UTF8.self)
            if id.utf8.count == 32, id.allSatisfy({ $0.isHexDigit }) {
                return SecretKey(namespace: namespace, account: "global:" + id, kind: .auditAnchor)
            }
        }
        guard !SecureFileSystem.exists(path) else {
            return SecretKey(namespace: namespace, account: "global", kind: .auditAnchor)
        }
        return SecretKey(namespace: namespace, account: "global:" + homeID, kind: .auditAnchor)
    }

    /// 32 hex digits of a BLAKE2b hash of the data directory, links resolved.
    var homeID: String {
        Hex.encode(BLAKE2b.hash(Array(SecureFileSystem.canonicalPath(dataDirectory).utf8), length: 16))
    }

    /// The anchor item, with the trail's id file written first when there is none (under the
    /// trail's lock).
    func itemCreating() throws(OStackError) -> SecretKey {
        if SecureFileSystem.exists(idPath) || SecureFileSystem.exists(path), let item = item() { return item }
        let id = homeID
        do {
            try SecureFileSystem.writeAtomically(Array((id + "\n").utf8), to: idPath)
        } catch {
            throw OStackError.storage(error, role: "the global audit trail's id file")
        }
        return SecretKey(namespace: namespace, account: "global:" + id, kind: .auditAnchor)
    }

    struct Line: Codable {
        var seq: Int
        var time: String
        var event: String
        var outcome: String
        var details: [String: String]
        var mac: String
    }

    func state() throws(OStackError) -> (key: [UInt8], seq: Int, mac: [UInt8])? {
        guard let item = item(), let stored = try secrets.read(item) else { return nil }
        let text = stored.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        let parts = text.split(separator: "|", omittingEmptySubsequences: false)
        guard parts.count == 2, let key = Hex.decode(String(parts[0])) else { return nil }
        let head = parts[1].split(separator: ":")
        guard head.count == 2, let seq = Int(head[0]), let mac = Hex.decode(String(head[1])) else { return nil }
        return (key, seq, mac)
    }

    func mac(_ line: Line, key: [UInt8], previous: [UInt8]) throws(OStackError) -> [UInt8] {
        let entry = AuditEntry(
            seq: line.seq, time: line.time, event: line.event, outcome: line.outcome, details: line.details)
        return try AuditTrail.mac(entry, previous: previous, key: SecretBytes(copying: key))
    }

    /// Appends one event (best effort: never stops the command it records).
    public func append(_ event: String, outcome: String = "ok", details: [String: String] = [:]) {
        // One appender at a time across processes: read head, append, anchor.
        guard let lock = try? FileLock(path: path + ".lock", timeout: 10) else { return }
        defer { withExtendedLifetime(lock) {} }
        do throws(OStackError) {
            var current = try state()
            let item = try itemCreating()
            if current == nil {
                // A new trail's key is anchored at 0 before its first line, so that a first line
                // whose anchor is never written is found by `head(after:)` like any other.
                let text = Hex.encode(SecureRandom.bytes(32)) + "|0:" + Hex.encode([UInt8](repeating: 0, count: 32))
                try secrets.write(SecretBytes(copying: Array(text.utf8)), for: item)
                current = try state()
            }
            guard let current else { return }
            let key = current.key
            let head = try self.head(after: current)
            let seq = head.seq + 1
            var line = Line(
                seq: seq, time: AuditTrail.timestamp(Date()), event: event, outcome: outcome, details: details, mac: "")
            let mac = try self.mac(line, key: key, previous: head.mac)
            line.mac = Hex.encode(mac)
            guard let data = try? JSONEncoder().encode(line) else { return }
            try? SecureFileSystem.appendLine(Array(data), to: path)
            let text = Hex.encode(key) + "|\(seq):" + line.mac
            try secrets.write(SecretBytes(copying: Array(text.utf8)), for: item)
        } catch {
            return
        }
    }

    /// The trail's head: the anchored one, or the last line past it when the lines after the anchor
    /// chain from it under the key — a line written whose anchor was not (a `kill -9` between the
    /// two, a keyring write that failed). Appending after the anchor instead would number a second
    /// line the same, and `verify` would report a gap that no one made.
    func head(after anchor: (key: [UInt8], seq: Int, mac: [UInt8])) throws(OStackError) -> (seq: Int, mac: [UInt8]) {
        let lines = lines()
        guard lines.count > anchor.seq else { return (anchor.seq, anchor.mac) }
        var previous = [UInt8](repeating: 0, count: 32)
        if anchor.seq > 0 {
            let anchored = lines[anchor.seq - 1]
            guard anchored.seq == anchor.seq, let stored = Hex.decode(anchored.mac),
                BLAKE2b.constantTimeEqual(stored, anchor.mac)
            else { return (anchor.seq, anchor.mac) }
            previous = stored
        }
        var head = (seq: anchor.seq, mac: anchor.seq > 0 ? anchor.mac : previous)
        for line in lines[anchor.seq...] {
            var unsigned = line
            unsigned.mac = ""
            guard line.seq == head.seq + 1, let stored = Hex.decode(line.mac),
                BLAKE2b.constantTimeEqual(try mac(unsigned, key: anchor.key, previous: previous), stored)
            else { break }
            previous = stored
            head = (line.seq, stored)
        }
        return head
    }

    /// The key that authenticates an account's buffered audit lines (`audit-pending.jsonl`,
    /// docs/security.md#aud-6): keyed BLAKE2b of a fixed label under this trail's random key, which
    /// the keyring holds. With `create`, a missing key is made (under the trail's lock, anchored at
    /// seq 0); nil when there is none.
    func bufferKey(create: Bool) throws(OStackError) -> SecretBytes? {
        var current = try state()
        if current == nil && create {
            let lock: FileLock
            do {
                try SecureFileSystem.createDirectory(SecureFileSystem.parentDirectory(of: path))
                lock = try FileLock(path: path + ".lock", timeout: 10)
            } catch {
                throw OStackError.storage(error, role: "the global audit trail's lock file")
            }
            try withExtendedLifetime(lock) { () throws(OStackError) in
                current = try state()
                if current == nil {
                    let key = SecureRandom.bytes(32)
                    let text = Hex.encode(key) + "|0:" + Hex.encode([UInt8](repeating: 0, count: 32))
                    try secrets.write(SecretBytes(copying: Array(text.utf8)), for: try itemCreating())
                    current = try state()
                }
            }
        }
        guard let key = current?.key else { return nil }
        do {
            return SecretBytes(
                copying: try BLAKE2b.mac(key: SecretBytes(copying: key), message: Array("ostack/audit-buffer/v1".utf8)))
        } catch {
            throw OStackError(.internal, detail: "audit buffer key")
        }
    }

    func lines() -> [Line] {
        guard let bytes = try? SecureFileSystem.readFile(path) else { return [] }
        return bytes.split(separator: UInt8(ascii: "\n")).compactMap {
            try? JSONDecoder().decode(Line.self, from: Data($0))
        }
    }

    public func entries() -> [AuditEntry] {
        lines().map {
            AuditEntry(seq: $0.seq, time: $0.time, event: $0.event, outcome: $0.outcome, details: $0.details)
        }
    }

    public func verify() throws(OStackError) -> AuditTrail.Verification {
        // The anchor before the lines (an append between the two reads leaves the lines ahead of
        // the anchor, which is sound; the other order would see an anchor past the lines read).
        let state = try state()
        let lines = lines()
        guard let state else {
            return lines.isEmpty
                ? .init(intact: true, events: 0)
                : .init(intact: false, events: lines.count, firstBadSeq: 1, problem: "anchor-missing")
        }
        var previous = [UInt8](repeating: 0, count: 32)
        for (index, line) in lines.enumerated() {
            guard line.seq == index + 1 else {
                return .init(intact: false, events: lines.count, firstBadSeq: index + 1, problem: "gap")
            }
            var unsigned = line
            unsigned.mac = ""
            let expected = try mac(unsigned, key: state.key, previous: previous)
            guard let stored = Hex.decode(line.mac), BLAKE2b.constantTimeEqual(expected, stored) else {
                return .init(intact: false, events: lines.count, firstBadSeq: line.seq, problem: "mac")
            }
            previous = stored
        }
        if state.seq == 0 { return .init(intact: true, events: lines.count) }  // a key made for buffers only
        if state.seq > lines.count {
            return .init(intact: false, events: lines.count, firstBadSeq: lines.count + 1, problem: "truncated")
        }
        guard BLAKE2b.constantTimeEqual(Hex.decode(lines[state.seq - 1].mac) ?? [], state.mac) else {
            return .init(intact: false, events: lines.count, firstBadSeq: state.seq, problem: "rolled-back")
        }
        return .init(intact: true, events: lines.count)
    }
}

extension AuthEnvironment {
    /// Records an event of `account` (buffered until its database is next opened; see AuditBuffer).
    public func audit(
        _ account: Account, _ event: String, outcome: String = "ok", details: [String: String] = [:],
        key: SecretBytes? = nil
    ) {
        auditBuffer(account).append(event, outcome: outcome, details: details, now: clock.now(), key: key)
    }

    /// The account's audit buffer, its lines authenticated under the keyring-held buffer key.
    public func auditBuffer(_ account: Account) -> AuditBuffer {
        AuditBuffer(
            layout: layout, account: account,
            signer: GlobalAuditTrail(layout: layout, secrets: secrets, namespaces: namespaces))
    }

    /// The key of the accounts' audit buffers when it exists (no keyring write): `unlock` reads it
    /// while Argon2id runs and hands it to `audit(_:_:key:)`.
    public func auditBufferKey() -> SecretBytes? {
        try? GlobalAuditTrail(layout: layout, secrets: secrets, namespaces: namespaces).bufferKey(create: false)
    }

    /// Records an event in the global trail.
    public func auditGlobal(_ event: String, outcome: String = "ok", details: [String: String] = [:]) {
        GlobalAuditTrail(layout: layout, secrets: secrets, namespaces: namespaces).append(
            event, outcome: outcome, details: details)
    }
}
