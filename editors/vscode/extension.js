// A minimal client: starts promptforge-lsp over stdio for Markdown files. Everything else
// (diagnostics, navigation, rename, hover, completion, inlay hints, quick fixes) is the
// server's; VS Code's built-in LSP client features show it.
const vscode = require('vscode');
const { LanguageClient } = require('vscode-languageclient/node');

let client;

function activate(context) {
  const command = vscode.workspace
    .getConfiguration('promptforge')
    .get('server.path', 'promptforge-lsp');
  client = new LanguageClient(
    'promptforge',
    'PromptForge',
    { command, args: [] },
    { documentSelector: [{ scheme: 'file', language: 'markdown' }] },
  );
  context.subscriptions.push({ dispose: () => client && client.stop() });
  return client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
