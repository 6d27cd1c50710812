import OStackCLI
import OStackCore
import OStackTestSupport
import Testing

/// The core names commands by value (`CommandSuggestion`); the CLI alone spells them.
@Suite struct CommandSpellingTests {
    /// One example of every case, with the text the user sees.
    static let examples: [(CommandSuggestion, String)] = [
        (.login(account: nil), "ostack login"),
        (.login(account: "work"), "ostack login --account work"),
        (.authRefresh, "ostack auth refresh"),
        (.unlock(account: nil), "ostack unlock"),
        (.unlock(account: "work"), "ostack unlock work"),
        (.unlockWithRecoveryKey(account: "work"), "ostack unlock work --recovery-key"),
        (.pinSet, "ostack pin set"),
        (.pinChange, "ostack pin change"),
        (.sync, "ostack sync"),
        (.syncWatch, "ostack sync --watch"),
        (.queueList, "ostack queue list"),
        (.queueRetry, "ostack queue retry"),
        (.queueDiscard, "ostack queue discard ID"),
        (.conflictsList, "ostack conflicts list"),
        (.conflictsResolve, "ostack conflicts resolve"),
        (.auditVerify, "ostack audit verify"),
        (.auditAll, "ostack audit --all"),
        (.accountsRemove(account: "work"), "ostack accounts remove work"),
        (.logout(account: "work"), "ostack logout work"),
        (.objectsShow(object: "task"), "ostack objects show task"),
        (.syncTrack(object: "task"), "ostack sync track task"),
        (.recordsUpdate, "ostack records update"),
        (.doctor, "ostack doctor"),
        (.loginOrganization, "ostack login --organization ID"),
        (.keyringMigrate(backend: "file", account: "work"), "ostack keyring migrate --to file work"),
        (.configUnset(key: "sync.interval"), "ostack config set sync.interval --unset"),
        (.configSet(key: "tls.ca-file", placeholder: "PATH"), "ostack config set tls.ca-file PATH"),
    ]

    /// The name of a case, by an exhaustive switch: a new case does not compile until it is named
    /// here, and `everyCaseIsSpelled` then fails until it has an example.
    static func caseName(_ command: CommandSuggestion) -> String {
        switch command {
        case .login: "login"
        case .loginOrganization: "loginOrganization"
        case .authRefresh: "authRefresh"
        case .unlock: "unlock"
        case .unlockWithRecoveryKey: "unlockWithRecoveryKey"
        case .pinSet: "pinSet"
        case .pinChange: "pinChange"
        case .sync: "sync"
        case .syncWatch: "syncWatch"
        case .queueList: "queueList"
        case .queueRetry: "queueRetry"
        case .queueDiscard: "queueDiscard"
        case .conflictsList: "conflictsList"
        case .conflictsResolve: "conflictsResolve"
        case .auditVerify: "auditVerify"
        case .auditAll: "auditAll"
        case .accountsRemove: "accountsRemove"
        case .logout: "logout"
        case .objectsShow: "objectsShow"
        case .syncTrack: "syncTrack"
        case .recordsUpdate: "recordsUpdate"
        case .doctor: "doctor"
        case .keyringMigrate: "keyringMigrate"
        case .configUnset: "configUnset"
        case .configSet: "configSet"
        }
    }

    static let allCaseNames: Set<String> = [
        "login", "authRefresh", "unlock", "unlockWithRecoveryKey", "pinSet", "pinChange", "sync", "syncWatch",
        "queueList", "queueRetry",
        "queueDiscard", "conflictsList", "conflictsResolve", "auditVerify", "auditAll", "accountsRemove", "logout",
        "objectsShow", "syncTrack", "recordsUpdate", "doctor", "keyringMigrate", "loginOrganization",
        "configUnset", "configSet",
    ]

    @Test func everyCaseIsSpelled() {
        #expect(Set(Self.examples.map { Self.caseName($0.0) }) == Self.allCaseNames)
        for (command, expected) in Self.examples {
            #expect(command.commandLine == expected)
            #expect(Wording.run(command).rendered == "Run `\(expected)`.")
            #expect(Wording.see(command).rendered == "See `\(expected)`.")
        }
    }

    @Test func wordingRendersProseAndCommands() {
        let pin: Wording = "Account \("work") has no PIN: set one with \(command: .pinSet)."
        #expect(pin.rendered == "Account work has no PIN: set one with `ostack pin set`.")
        #expect(pin.commands == [.pinSet])
        #expect(Wording.text("Try again later.").rendered == "Try again later.")
        #expect(Wording.text("Try again later.").commands.isEmpty)
        // Built either way, the same wording is equal.
        #expect(Wording.run(.sync) == "Run \(command: .sync).")
        #expect(Wording.text("A PIN has 4 to 64 characters.") == "A PIN has \(4) to \(64) characters.")
        let interval = Setting.all.first { $0.key == "sync.interval" }
        #expect(interval?.summary.rendered == "Interval of `ostack sync --watch`.")
    }

    @Test func hintsAreShownAsBefore() {
        let presenter = ErrorPresenter()
        let cases: [(OStackError, String)] = [
            (
                OStackError(
                    .invalidInput, context: .init(suggestion: "This account has a PIN: use \(command: .pinChange).")),
                "This account has a PIN: use `ostack pin change`."
            ),
            (
                OStackError(
                    .invalidFilter,
                    context: .init(suggestion: "Unknown field 'x'. See \(command: .objectsShow(object: "task")).")),
                "Unknown field 'x'. See `ostack objects show task`."
            ),
            (
                OStackError(.validation, context: .init(suggestion: .see(.queueList))),
                "See `ostack queue list`."
            ),
            // Unreachable: a later push is promised only for a change saved and queued (counted, or
            // flagged as an import's and a multi-record create's are).
            (OStackError(.offline), "Check the connection."),
            (
                OStackError(.offline, context: .init(count: 1)),
                "Check the connection; `ostack sync` pushes queued changes later."
            ),
            (
                { () -> OStackError in
                    var error = OStackError(.offline)
                    error.context.savedAndQueued = true
                    return error
                }(), "Check the connection; `ostack sync` pushes queued changes later."
            ),
        ]
        for (error, hint) in cases {
            #expect(presenter.present(error, referenceID: "R1").hint == hint)
        }
        let ambiguous = OStackError(.ambiguousAccount, context: .init(account: "w", suggestion: .text("work, web")))
        #expect(
            presenter.present(ambiguous, referenceID: "R1").message == "'w' matches more than one account: work, web.")
    }

    /// Code lines of Sources/OStackCore (in whichever file) that still spell a command. Remove an
    /// entry once its line names the command by value.
    static let pending: Set<String> = []

    /// No hint of the core spells an `ostack …` command: a grep of its sources, comments excluded.
    @Test func theCoreSpellsNoCommand() throws {
        var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(3)  // <repo>/Tests/OStackCLITests/CommandSpellingTests.swift
        let repository = parts.joined(separator: "/")
        let result = try runProcess(
            executable: "/bin/grep",
            arguments: ["-rnE", "--include=*.swift", "ostack [a-z-]", repository + "/Sources/OStackCore"])
        #expect(result.status == 0 || result.status == 1, "\(result.stderr)")
        var spelled: [String] = []
        for line in result.stdout.split(separator: "\n") {
            // path:line:code
            let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count == 3 else { continue }
            let code = fields[2].drop { $0 == " " }
            if code.hasPrefix("//") { continue }
            let path = fields[0].dropFirst(repository.count + 1)
            if !Self.pending.contains(String(code)) { spelled.append("\(path): \(code)") }
        }
        #expect(spelled.isEmpty, "\(spelled.joined(separator: "\n"))")
        // The settings' summaries are hints too.
        for setting in Setting.all {
            for case .text(let text) in setting.summary.parts { #expect(!text.contains("ostack "), "\(setting.key)") }
        }
    }
}
