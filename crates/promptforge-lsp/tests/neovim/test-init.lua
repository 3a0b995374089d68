-- Drives promptforge-lsp from a real Neovim (0.7.2, Debian 12's package) as a user would:
-- open a prompt, wait for diagnostics, go to a definition, hover, apply a quick fix,
-- rename a section. Started by tests/neovim.rs as
--   nvim --headless -n -i NONE -u test-init.lua
-- with PF_LSP (the server binary), PF_PROMPT (the file) and PF_OUT (where the results go).
-- Neovim 0.7 has no vim.lsp.start: the client is started with vim.lsp.start_client and
-- attached with vim.lsp.buf_attach_client.

local results = { steps = {} }

local function step(name)
  table.insert(results.steps, name)
end

local function finish(ok, err)
  results.ok = ok
  results.error = err and tostring(err) or nil
  local file = assert(io.open(os.getenv('PF_OUT'), 'w'))
  file:write(vim.fn.json_encode(results))
  file:close()
  vim.cmd('qall!')
end

-- A quick-fix menu answered by picking the first entry, as a user pressing Enter.
vim.ui.select = function(items, _, on_choice)
  on_choice(items[1], 1)
end

local function buffer_text(bufnr)
  return table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), '\n')
end

-- Puts the cursor on the first match of a literal text, `shift` characters in.
local function cursor_on(text, shift)
  vim.api.nvim_win_set_cursor(0, { 1, 0 })
  local line = vim.fn.search('\\V' .. vim.fn.escape(text, '\\'), 'cW')
  assert(line > 0, 'not found: ' .. text)
  local col = vim.api.nvim_win_get_cursor(0)[2]
  vim.api.nvim_win_set_cursor(0, { line, col + shift })
  return line
end

-- The hover text at the cursor (the server's answer, waited for up to `patience` ms).
local function hover_text(bufnr, patience)
  local answers = vim.lsp.buf_request_sync(bufnr, 'textDocument/hover', vim.lsp.util.make_position_params(), patience)
  for _, answer in pairs(answers or {}) do
    if answer.result and answer.result.contents then
      return answer.result.contents.value
    end
  end
end

local ok, err = pcall(function()
  vim.cmd('edit ' .. vim.fn.fnameescape(os.getenv('PF_PROMPT')))
  local bufnr = vim.api.nvim_get_current_buf()
  local client_id = vim.lsp.start_client({
    name = 'promptforge',
    cmd = { os.getenv('PF_LSP') },
    root_dir = vim.fn.fnamemodify(os.getenv('PF_PROMPT'), ':p:h'),
  })
  assert(client_id, 'the language server did not start')
  assert(vim.lsp.buf_attach_client(bufnr, client_id), 'could not attach the client')
  step('attached')

  -- Diagnostics, published on open.
  assert(vim.wait(60000, function()
    return #vim.diagnostic.get(bufnr) >= 3
  end, 20), 'the diagnostics did not arrive')
  results.diagnostics = {}
  for _, d in ipairs(vim.diagnostic.get(bufnr)) do
    local lsp = d.user_data and d.user_data.lsp or {}
    table.insert(results.diagnostics, {
      lnum = d.lnum,
      col = d.col,
      end_col = d.end_col,
      severity = d.severity,
      source = d.source,
      message = d.message,
      code = lsp.code,
    })
  end
  step('diagnostics')

  -- Go to definition: from the jump target to its heading.
  local from = cursor_on('jump("## Summarise")', 8)
  vim.lsp.buf.definition()
  assert(vim.wait(30000, function()
    return vim.api.nvim_win_get_cursor(0)[1] ~= from
  end, 20), 'go-to-definition did not move the cursor')
  results.definition = vim.api.nvim_win_get_cursor(0)
  results.definition_line = vim.api.nvim_get_current_line()
  step('definition')

  -- Hover on a Lua API call.
  cursor_on('store.read', 7)
  results.hover = hover_text(bufnr, 30000)
  step('hover')

  -- What a binding will bind to (Neovim 0.7 has no inlay hints: the hover shows it). The
  -- first one loads the picker; it is answered from the server's picker thread.
  cursor_on('tools.bind("fetch"', 3)
  results.binding_hover = hover_text(bufnr, 120000)
  step('binding hover')

  -- Completion inside a target string: the sections visible from there.
  cursor_on('jump("## Sumarise")', 6)
  local answers = vim.lsp.buf_request_sync(bufnr, 'textDocument/completion', vim.lsp.util.make_position_params(), 30000)
  results.completion = {}
  for _, answer in pairs(answers or {}) do
    local items = answer.result and (answer.result.items or answer.result) or {}
    for _, item in ipairs(items) do
      table.insert(results.completion, item.label)
    end
  end
  step('completion')

  -- Find references from the heading (into the quickfix list, as `gr` does).
  cursor_on('## Summarise', 4)
  vim.fn.setqflist({})
  vim.lsp.buf.references({ includeDeclaration = true })
  assert(vim.wait(30000, function()
    return #vim.fn.getqflist() > 0
  end, 20), 'no references arrived')
  results.references = {}
  for _, entry in ipairs(vim.fn.getqflist()) do
    table.insert(results.references, entry.lnum)
  end
  vim.cmd('cclose')
  step('references')

  -- The section outline (Neovim 0.7 lists it in the quickfix list too).
  vim.fn.setqflist({})
  vim.lsp.buf.document_symbol()
  assert(vim.wait(30000, function()
    return #vim.fn.getqflist() > 0
  end, 20), 'no symbols arrived')
  results.symbols = {}
  for _, entry in ipairs(vim.fn.getqflist()) do
    table.insert(results.symbols, entry.text)
  end
  vim.cmd('cclose')
  step('symbols')

  -- The quick fix for the misspelt target.
  cursor_on('jump("## Sumarise")', 8)
  vim.lsp.buf.code_action()
  assert(vim.wait(30000, function()
    return not buffer_text(bufnr):find('## Sumarise', 1, true)
  end, 20), 'the quick fix was not applied')
  step('code action')

  -- Rename the section from its heading.
  cursor_on('## Summarise', 4)
  vim.lsp.buf.rename('Synthesis')
  assert(vim.wait(30000, function()
    return buffer_text(bufnr):find('## Synthesis', 1, true) ~= nil
  end, 20), 'the rename was not applied')
  results.text = buffer_text(bufnr)
  step('rename')

  -- After the edits only the two syntax problems remain.
  assert(vim.wait(30000, function()
    return #vim.diagnostic.get(bufnr) == 2
  end, 20), 'the diagnostics did not follow the edits')
  step('diagnostics after edits')

  vim.lsp.stop_client(client_id)
end)

finish(ok, err)
