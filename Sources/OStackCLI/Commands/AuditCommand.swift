import ArgumentParser
import FoundationEssentials
import OStackCore

/// `ostack audit [ACCOUNT|--all] [--since T] [--event E] [--limit N]` and
/// `ostack audit verify [ACCOUNT|--all]` (docs/audit.md).
struct AuditCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audit", abstract: "Show and verify the tamper-evident audit trail.",
        subcommands: [Show.self, Verify.self], defaultSubcommand: Show.self)

    struct EventDocument: Encodable {
        var seq: Int
        var time: String
        /// nil for the global trail (`--all`): `null` in JSON, as documented.
        @AlwaysPresent var account: AccountReference?
        var event: String
        var outcome: String
        var details: [String: String]
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "show", abstract: "List audit events (the default).")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var selection: AccountArgument
        @Flag(name: .long, help: "Every account, and the global trail.") var all = false
        @Option(name: .long, help: "Only events at or after this UTC time, e.g. 2026-11-01 or 2026-11-01T12:00:00Z.")
        var since: String?
        @Option(name: .long, help: "Only this event (or its family, e.g. pin, sync).") var event: String?
        @Option(name: .long, parsing: .unconditional, help: "At most this many (the latest) per account.")
        var limit: Int?

        func validate() throws {
            if let limit, limit < 0 { throw ValidationError("--limit must not be negative.") }
            if all && (selection.target != nil || global.account != nil) {
                throw ValidationError("Pass an account (or --account) or --all, not both.")
            }
            if let since, !Self.isTimestamp(since) {
                throw ValidationError("--since takes a UTC date or time, e.g. 2026-11-01 or 2026-11-01T12:00:00Z.")
            }
        }

        /// `YYYY-MM-DD`, or `YYYY-MM-DDTHH:MM[:SS[.fff]]Z` (events are stored in that form, so they
        /// compare as text).
        static func isTimestamp(_ text: String) -> Bool {
            let bytes = Array(text.utf8)
            func digits(_ range: Range<Int>) -> Int? {
                guard range.upperBound <= bytes.count, range.allSatisfy({ (48...57).contains(bytes[$0]) }) else {
                    return nil
                }
                return range.reduce(0) { $0 * 10 + Int(bytes[$1] - 48) }
            }
            guard bytes.count >= 10, digits(0..<4) != nil, bytes[4] == 45, let month = digits(5..<7), bytes[7] == 45,
                let day = digits(8..<10), (1...12).contains(month), (1...31).contains(day)
            else { return false }
            if bytes.count == 10 { return true }
            guard bytes.count >= 17, bytes[10] == 84, let hour = digits(11..<13), bytes[13] == 58,
                let minute = digits(14..<16), hour < 24, minute < 60, bytes.last == 90
            else { return false }
            let rest = bytes[16..<(bytes.count - 1)]
            if rest.isEmpty { return true }
            guard rest.first == 58, let second = digits(17..<19), second < 61 else { return false }
            let fraction = bytes[19..<(bytes.count - 1)]
            return fraction.isEmpty
                || (fraction.first == 46 && fraction.count > 1
                    && fraction.dropFirst().allSatisfy { (48...57).contains($0) })
        }

        func run() async throws {
            try await CommandRunner.run(global) { context in
                var context = context
                context.countsAsUse = false  // reading the trail is not using the account (LOCK-2)
                var events: [EventDocument] = []
                // With --all, a locked account's trail cannot be read (its key is sealed by the PIN):
                // the others and the global trail are listed, and the command then exits `locked`.
                // (One locked account made the whole listing fail.)
                var locked: OStackError?
                for account in try context.accounts(target: selection.target, all: all) {
                    let service: AccountSession
                    do {
                        service = try context.session(account)
                    } catch let error as OStackError where all && (error.code == .locked || error.code == .pinLockedOut)
                    {
                        locked = locked ?? error
                        continue
                    }
                    for entry in try service.audit.entries(since: since, event: event, limit: limit) {
                        events.append(
                            EventDocument(
                                seq: entry.seq, time: entry.time, account: .init(account), event: entry.event,
                                outcome: entry.outcome, details: entry.details))
                    }
                }
                if all {
                    let environment = try context.authEnvironment()
                    let global = GlobalAuditTrail(
                        layout: context.layout, secrets: environment.secrets, namespaces: environment.namespaces)
                    var entries = global.entries().filter { entry in
                        (since.map { entry.time >= $0 } ?? true)
                            && (event.map { entry.event == $0 || entry.event.hasPrefix($0 + ".") } ?? true)
                    }
                    if let limit { entries = Array(entries.suffix(max(0, limit))) }
                    events += entries.map {
                        EventDocument(
                            seq: $0.seq, time: $0.time, account: nil, event: $0.event, outcome: $0.outcome,
                            details: $0.details)
                    }
                }
                struct Document: Encodable { var events: [EventDocument] }
                if !events.isEmpty { context.page() }
                context.emit(json: Document(events: events)) {
                    Table(
                        headers: ["seq", "time", "account", "event", "outcome", "details"],
                        rows: events.map { event in
                            [
                                String(event.seq), event.time, event.account?.alias ?? "(global)", event.event,
                                event.outcome,
                                event.details.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(
                                    separator: " "),
                            ]
                        }
                    ).render(terminal: context.terminal, whenEmpty: "No audit events.")
                }
                if let locked { throw locked }
            }
        }
    }

    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "verify",
            abstract: "Check the trail's chain and its keyring anchor (exit 1 with the first bad sequence).")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var selection: AccountArgument
        @Flag(name: .long, help: "Every account, and the global trail.") var all = false

        func validate() throws {
            if all && (selection.target != nil || global.account != nil) {
                throw ValidationError("Pass an account (or --account) or --all, not both.")
            }
        }

        /// An account whose trail could not be checked (`locked`, `pin-locked-out`).
        struct Skipped: Encodable {
            var id: String
            var reason: String
        }

        struct Result: Encodable {
            var id: String
            var intact: Bool
            var events: Int
            var firstBadSeq: Int?
            var problem: String?
        }

        func run() async throws {
            try await CommandRunner.run(global) { context in
                var context = context
                context.countsAsUse = false  // checking the trail is not using the account (LOCK-2)
                var results: [Result] = []
                // With --all, a locked account cannot be checked (its trail's key is sealed by the
                // PIN): every other trail and the global one are, the locked ones are listed as
                // skipped, and the command exits 1 if a checked trail is not intact, else `locked`
                // (4). One locked account made the whole check fail, so tampering elsewhere went
                // unreported.
                var skipped: [Skipped] = []
                var locked: OStackError?
                for account in try context.accounts(target: selection.target, all: all) {
                    let session: AccountSession
                    do {
                        session = try context.session(account)
                    } catch let error as OStackError where all && (error.code == .locked || error.code == .pinLockedOut)
                    {
                        skipped.append(Skipped(id: account.id.rawValue, reason: error.code.rawValue))
                        locked = locked ?? error
                        continue
                    }
                    let verification = try session.audit.verify()
                    if !verification.intact {
                        try context.authEnvironment().auditGlobal(
                            "audit.verify", outcome: "failed",
                            details: ["account": account.id.rawValue, "seq": String(verification.firstBadSeq ?? 0)])
                    }
                    results.append(
                        Result(
                            id: account.id.rawValue, intact: verification.intact, events: verification.events,
                            firstBadSeq: verification.firstBadSeq, problem: verification.problem))
                }
                if all {
                    let environment = try context.authEnvironment()
                    let verification = try GlobalAuditTrail(
                        layout: context.layout, secrets: environment.secrets, namespaces: environment.namespaces
                    ).verify()
                    results.append(
                        Result(
                            id: "global", intact: verification.intact, events: verification.events,
                            firstBadSeq: verification.firstBadSeq, problem: verification.problem))
                }
                struct Document: Encodable {
                    var accounts: [Result]
                    var skipped: [Skipped]?
                }
                context.emit(json: Document(accounts: results, skipped: skipped.isEmpty ? nil : skipped)) {
                    (results.map { result in
                        result.intact
                            ? "\(result.id): intact (\(result.events) events)"
                            : "\(result.id): NOT intact at sequence \(result.firstBadSeq ?? 0) (\(Self.explain(result.problem)))"
                    } + skipped.map { "\($0.id): not checked (\($0.reason))" }).joined(separator: "\n")
                }
                if results.contains(where: { !$0.intact }) { throw ExitCode(1) }
                if let locked { throw locked }
            }
        }

        static func explain(_ problem: String?) -> String {
            switch problem {
            case "gap": "an entry is missing"
            case "mac": "an entry was changed"
            case "truncated": "entries after it were removed"
            case "rolled-back": "the files are an older copy, or the trail was rewritten"
            case "anchor-missing": "the keyring anchor is missing"
            default: "inconsistent"
            }
        }
    }
}
