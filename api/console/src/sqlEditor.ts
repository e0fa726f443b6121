// The SQL editor: CodeMirror 6 with SQL highlighting and inline diagnostics from
// POST /pipelines/validate, re-checked (debounced) as the user types; editing a
// pipeline's SQL, the answers also say whether the SQL can keep its state.

import { sql } from "@codemirror/lang-sql";
import { type Diagnostic as CmDiagnostic, linter, lintGutter } from "@codemirror/lint";
import type { Text } from "@codemirror/state";
import { EditorView, keymap } from "@codemirror/view";
import { basicSetup } from "codemirror";
import { indentWithTab } from "@codemirror/commands";

import { ApiError, type Diagnostic, post, type Validation } from "./api";

export interface SqlEditorOptions {
  parent: HTMLElement;
  doc: string;
  label: string;
  /** The id of an element describing the editor (e.g. how to leave it by keyboard). */
  describedBy?: string;
  /** A pipeline the SQL would update: each answer then says whether it keeps its state. */
  pipeline?: string;
  /** Called with each validation's answer (or the error that prevented one). */
  onValidated: (result: Validation | null, error: Error | null) => void;
  /** Called on every edit of the text (before it is checked again). */
  onChange?: () => void;
  validateDelayMs?: number;
}

/** The editor's position of a 1-based line and column, clamped into the document. */
export function offsetOf(doc: Text, line: number, column: number): number {
  const lineInfo = doc.line(Math.min(Math.max(line, 1), doc.lines));
  return Math.min(lineInfo.from + Math.max(column - 1, 0), lineInfo.to);
}

/** A located problem as CodeMirror marks it: from its column to the end of the word there. */
export function toCodeMirror(doc: Text, diagnostic: Diagnostic): CmDiagnostic {
  const from = offsetOf(doc, diagnostic.line, diagnostic.column);
  const lineEnd = doc.lineAt(from).to;
  // Mark from the column to the end of the word there (at least one character).
  const rest = doc.sliceString(from, lineEnd);
  const word = /^[\w.']+/.exec(rest)?.[0].length ?? 1;
  return { from, to: Math.min(from + Math.max(word, 1), lineEnd), severity: "error",
           message: diagnostic.message };
}

export function createSqlEditor(options: SqlEditorOptions): EditorView {
  const validate = linter(async (view) => {
    const text = view.state.doc.toString();
    if (!text.trim()) {
      options.onValidated(null, null);
      return [];
    }
    try {
      const result = await post<Validation>("/pipelines/validate",
        options.pipeline ? { sql: text, pipeline: options.pipeline } : { sql: text });
      options.onValidated(result, null);
      // The document may have changed while the answer was on its way.
      if (view.state.doc.toString() !== text) return [];
      return result.diagnostics.map((d) => toCodeMirror(view.state.doc, d));
    } catch (error) {
      options.onValidated(null, error instanceof ApiError ? error : new Error(String(error)));
      return [];
    }
  }, { delay: options.validateDelayMs ?? 400 });
  return new EditorView({
    doc: options.doc,
    parent: options.parent,
    extensions: [
      basicSetup,
      // Tab indents inside the editor; Escape then Tab leaves it (CodeMirror's convention).
      keymap.of([indentWithTab]),
      sql(),
      lintGutter(),
      validate,
      EditorView.updateListener.of((update) => {
        if (update.docChanged) options.onChange?.();
      }),
      EditorView.contentAttributes.of({ "aria-label": options.label, "aria-multiline": "true",
        ...(options.describedBy ? { "aria-describedby": options.describedBy } : {}) }),
    ],
  });
}

/** Insert ``text`` at the cursor (the catalog's buttons). */
export function insertAtCursor(view: EditorView, text: string): void {
  const { from, to } = view.state.selection.main;
  view.dispatch({ changes: { from, to, insert: text }, selection: { anchor: from + text.length } });
  view.focus();
}
