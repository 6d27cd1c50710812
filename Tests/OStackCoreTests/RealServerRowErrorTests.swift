import Testing

@testable import OStackCore

/// Per-row failures in the shape the real ObjectStack server writes them (fidelity audit, 2026-11-29).
///
/// `metadata-protocol/src/protocol.ts` `toRowApiError` builds every failed row of `updateMany` /
/// `deleteMany` as `{code, message, httpStatus?}`: `httpStatus` only when the thrown error declared a
/// status, and `code` `INTERNAL_ERROR` for anything outside the closed vocabulary (a driver error: a
/// lost connection, a deadlock, a serialization failure, a unique violation inside a bulk update).
/// The dev server always writes `httpStatus` (and never `INTERNAL_ERROR`), so the client's row
/// classification was only ever exercised on a shape production does not send for these faults.
/// The same fault on a single-record route is a 500 (`resolveThrownHttpError`'s fallback status):
/// a row that failed for a reason the server did not declare is a server error, not a refusal of
/// the change.
@Suite struct RealServerRowErrorTests {
    static func json(_ text: String) -> JSONValue? { JSONValue.parse(Array(text.utf8)) }

    @Test func anUndeclaredRowFaultIsAServerErrorNotARefusal() {
        let row = Self.json(
            #"{"id":"a","success":false,"index":0,"errors":[{"code":"INTERNAL_ERROR","message":"The update of this record failed. The reason is in the server log."}]}"#
        )
        let verdict = PushClassifier.classifyRow(row, id: "a", operation: .update)
        #expect(verdict == .failed(.serverError(status: 500, retryAfter: nil)))
    }

    @Test func anUndeclaredDeleteRowFaultIsAServerErrorNotARefusal() {
        let row = Self.json(
            #"{"id":"a","success":false,"index":0,"errors":[{"code":"INTERNAL_ERROR","message":"The delete of this record failed. The reason is in the server log."}]}"#
        )
        let verdict = PushClassifier.classifyRow(row, id: "a", operation: .delete)
        #expect(verdict == .failed(.serverError(status: 500, retryAfter: nil)))
    }

    /// `objectql/src/engine.ts` (cascadeDeleteRelations): deleting a record that a `restrict` lookup
    /// (or a required `set_null` one) still references throws `DELETE_RESTRICTED` with `status: 409`;
    /// inside `deleteMany` that becomes the row `{code: "DELETE_RESTRICTED", httpStatus: 409}`. The
    /// dev server has no delete behaviours at all, so this row never reaches the client in tests; a
    /// single DELETE with the same refusal is `.restricted` (`classifyFailure`).
    @Test func aRestrictedDeleteRowIsRestricted() {
        let row = Self.json(
            #"{"id":"a","success":false,"index":0,"errors":[{"code":"DELETE_RESTRICTED","message":"Cannot delete: 2 task records reference it.","httpStatus":409}]}"#
        )
        let verdict = PushClassifier.classifyRow(row, id: "a", operation: .delete)
        #expect(verdict == .failed(.restricted))
    }
}
