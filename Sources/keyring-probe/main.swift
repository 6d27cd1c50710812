// A test-only probe (never linked into ostack): performs one keyring call in a fresh process —
// whose D-Bus environment the test controls — and prints the outcome as one word.
//   keyring-probe <deadline-seconds> <write|read|list|delete|check|provider> <namespace>
import KeyringKit
import SodiumKit

let arguments = CommandLine.arguments
let deadline = arguments.count > 1 ? Double(arguments[1]) ?? 5 : 5
let action = arguments.count > 2 ? arguments[2] : "list"
let namespace = arguments.count > 3 ? arguments[3] : "ostack-probe:test"
let keyring = SecretServiceKeyring(deadline: deadline)
let address = KeyringAddress(namespace: namespace, account: "probe", kind: "db-key", version: 1)

do {
    switch action {
    case "write": try keyring.write(SecretBytes(copying: Array("probe-secret".utf8)), for: address)
    case "read": print(try keyring.read(address) == nil ? "missing" : "found")
    case "delete": try keyring.delete(address)
    case "check": try keyring.checkAvailable()
    case "provider": print(SecretServiceKeyring.detectProvider().name)
    default: _ = try keyring.list(namespace: namespace)
    }
    print("ok")
} catch {
    switch error {
    case .locked: print("locked")
    case .noCollection: print("noCollection")
    case .approvalPending: print("approvalPending")
    case .noService: print("noService")
    case .timeout: print("timeout")
    case .denied: print("denied")
    case .other, .wrongPassphrase, .passphraseRequired, .passphraseMismatch, .damaged: print("other")
    }
}
