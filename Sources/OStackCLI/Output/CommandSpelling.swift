import OStackCore

/// How the CLI spells the commands the core names by value (`CommandSuggestion`): the one place
/// that knows the binary's name and its command syntax for hints.
extension CommandSuggestion {
    /// The command line, e.g. `ostack login --account work`.
    public var commandLine: String {
        "ostack " + arguments
    }

    private var arguments: String {
        switch self {
        case .login(let account): "login" + (account.map { " --account \($0)" } ?? "")
        case .loginOrganization: "login --organization ID"
        case .authRefresh: "auth refresh"
        case .unlock(let account): "unlock" + (account.map { " \($0)" } ?? "")
        case .unlockWithRecoveryKey(let account): "unlock \(account) --recovery-key"
        case .pinSet: "pin set"
        case .pinChange: "pin change"
        case .sync: "sync"
        case .syncWatch: "sync --watch"
        case .queueList: "queue list"
        case .queueRetry: "queue retry"
        case .queueDiscard: "queue discard ID"
        case .conflictsList: "conflicts list"
        case .conflictsResolve: "conflicts resolve"
        case .auditVerify: "audit verify"
        case .auditAll: "audit --all"
        case .accountsRemove(let account): "accounts remove \(account)"
        case .logout(let account): "logout \(account)"
        case .objectsShow(let object): "objects show \(object)"
        case .syncTrack(let object): "sync track \(object)"
        case .recordsUpdate: "records update"
        case .doctor: "doctor"
        case .keyringMigrate(let backend, let account): "keyring migrate --to \(backend) \(account)"
        case .configUnset(let key): "config set \(key) --unset"
        case .configSet(let key, let placeholder): "config set \(key) \(placeholder)"
        }
    }
}

extension Wording {
    /// The text the user sees: prose as written, each command as `` `ostack …` ``. Not sanitised:
    /// callers that print it pass it through `ErrorPresenter.sanitize`.
    public var rendered: String {
        rendered(spellingCommands: { "`\($0.commandLine)`" })
    }
}
