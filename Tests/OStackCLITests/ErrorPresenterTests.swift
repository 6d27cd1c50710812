import OStackCLI
import OStackCore
import Testing

@Suite struct ErrorPresenterTests {
    let presenter = ErrorPresenter()

    /// The exit codes docs/errors.md fixes for each code.
    static let specExitCodes: [OStackError.Code: Int32] = [
        .internal: 1, .notSignedIn: 3, .passwordExpired: 3, .mfaRequired: 3, .twoFactorRequired: 3,
        .wrongTwoFactorCode: 3, .sessionExpired: 3, .locked: 4, .pinLockedOut: 4, .wrongPIN: 4, .wrongRecoveryKey: 4,
        .offline: 5, .tls: 5, .timeout: 5, .conflict: 6, .notFound: 7, .unknownAccount: 7, .unknownObject: 7,
        .forbidden: 8, .validation: 9, .refused: 9, .deleteRestricted: 9, .olderChangeFailed: 11, .invalidFilter: 9, .keyringUnavailable: 10,
        .keyringDamaged: 10, .pinBusy: 10, .notEnoughMemory: 10, .agentUnresponsive: 10, .invalidSetting: 9,
        .requestTooLong: 9,
        .keyringLocked: 10,
        .storageUnreadable: 10, .storageMissing: 10, .storageFull: 10, .accountInAnotherHome: 10, .unsafeStorage: 10, .serverError: 11, .rateLimited: 11,
    ]

    @Test(arguments: OStackError.Code.allCases)
    func everyCodeHasItsOwnMessageAndASpecExitCode(code: OStackError.Code) {
        let canary = "CNRY-7f3a-DETAIL"
        let error = OStackError(code, context: .init(account: "work", host: "crm.example.com"), detail: canary)
        let shown = presenter.present(error, referenceID: "R1")
        #expect(shown.code == code.rawValue)
        #expect(!shown.message.isEmpty)
        #expect([1, 3, 4, 5, 6, 7, 8, 9, 10, 11].contains(shown.exitCode))
        if let expected = Self.specExitCodes[code] { #expect(shown.exitCode == expected) }
        // The developer detail never reaches the user.
        #expect(!shown.message.contains(canary))
        #expect(!(shown.hint ?? "").contains(canary))
    }

    /// A damaged file keyring is named as such, not as a missing Secret Service.
    /// An unknown object the error does not name reads as a sentence ("Unknown object that." before).
    @Test func anUnknownObjectIsNamedWhenKnown() {
        #expect(presenter.present(OStackError(.unknownObject), referenceID: "R").message == "Unknown object.")
        let named = presenter.present(OStackError(.unknownObject, context: .init(object: "nosuch")), referenceID: "R")
        #expect(named.message == "Unknown object 'nosuch'.")
    }

    /// A missing record names where to look (its JSON error had no hint).
    @Test func aMissingRecordSaysWhereToLook() {
        var context = OStackError.Context(account: "work", object: "task")
        context.recordIDs = ["r1"]
        let shown = presenter.present(OStackError(.notFound, context: context), referenceID: "R")
        #expect(shown.message == "No task record r1 in account work.")
        #expect(shown.hint == "`ostack records list task` lists its records.")
    }

    @Test func aDamagedFileKeyringIsNamed() {
        let error = OStackError(
            .keyringDamaged, context: .init(suggestion: "Restore it from a backup."))
        let shown = presenter.present(error, referenceID: "R")
        #expect(shown.message == "The file keyring cannot be read: its file is damaged.")
        #expect(shown.exitCode == 10 && (shown.hint ?? "").contains("backup"))
    }

    @Test func foreignErrorsBecomeTheGenericMessageWithAReference() {
        struct LeakyError: Error, CustomStringConvertible {
            var description: String { "SELECT * FROM users WHERE token='CNRY-SQL' at /srv/CNRY-PATH/app.rb" }
        }
        let shown = presenter.present(LeakyError(), referenceID: "ab12cd")
        #expect(shown.message == "Something went wrong. (ref ab12cd)")
        #expect(shown.exitCode == 1)
        #expect(!shown.message.contains("CNRY") && !(shown.hint ?? "").contains("CNRY"))
    }

    @Test func contextValuesAreStrippedOfControlCharacters() {
        let error = OStackError(.unknownAccount, context: .init(account: "evil\u{1B}[2J\u{1B}]0;title\u{07}\r\nname"))
        let shown = presenter.present(error, referenceID: "R")
        #expect(!shown.message.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F })
        #expect(shown.message.contains("evil"))
    }

    @Test(arguments: [
        ("plain", "plain"), ("a\u{1B}[31mred\u{1B}[0m", "ared"), ("tab\there", "tabhere"),
        // A C1 CSI (0x9B) introduces a sequence as ESC [ does: it is removed with its final byte.
        ("c1\u{9B}2Jx", "c1x"), ("bell\u{07}", "bell"), ("ünïcødé ok", "ünïcødé ok"),
        // OSC payloads go with their sequence (BEL- or ST-terminated), so no title text remains.
        ("a\u{1B}]0;pwned\u{07}b", "ab"), ("a\u{1B}]8;;http://x\u{1B}\\link\u{1B}]8;;\u{1B}\\b", "alinkb"),
        ("a\u{9D}0;pwned\u{9C}b", "ab"), ("a\u{1B}P1$r\u{1B}\\b", "ab"),
        // Bidirectional overrides and isolates cannot reorder what the user reads.
        ("file\u{202E}txt.exe", "filetxt.exe"), ("a\u{2066}b\u{2069}c", "abc"),
        // Line and paragraph separators (a line break to some terminals).
        ("one\u{2028}two\u{2029}three", "onetwothree"),
    ])
    func sanitizeRemovesEscapesAndControls(input: String, expected: String) {
        #expect(ErrorPresenter.sanitize(input) == expected)
    }

    @Test func sanitizeBoundsLength() {
        #expect(ErrorPresenter.sanitize(String(repeating: "x", count: 1000)).count == 200)
    }

    @Test func validationNamesFieldLabels() {
        let error = OStackError(.validation, context: .init(fields: ["Title", "Due date"]))
        #expect(presenter.present(error, referenceID: "R").message == "The data is not valid: Title, Due date.")
    }

    @Test func jsonEscapesWhatTerminalsWouldInterpret() {
        struct Document: Encodable { var value: String }
        let json = JSONOutput.encode(Document(value: "a\u{9B}31mb\u{202E}c\u{7F}d\u{1B}e"))
        #expect(
            !json.unicodeScalars.contains {
                $0.value == 0x9B || $0.value == 0x202E || $0.value == 0x7F || $0.value == 0x1B
            })
        #expect(json.contains("\\u009b") && json.contains("\\u202e") && json.contains("\\u007f"))
    }
}
