-- The per-VM prelude: sealed `sys`, the JSON-only `var` proxy, fanout result objects and a
-- `table.concat` that honours `__tostring`. Runs once per VM before any prompt code.
local null, sys = ...
local function alive()
  return sys("alive")
end
local function charge(steps)
  return sys("charge", steps)
end
local function clean(e)
  return sys("clean", e)
end
local function note_error(rendered, kind)
  return sys("note", rendered, kind)
end
local type, error, tostring, setmetatable, getmetatable, next, select =
  type, error, tostring, setmetatable, getmetatable, next, select
local raw_setmetatable = setmetatable
local rawget, raw_pcall, raw_xpcall = rawget, pcall, xpcall
local raw_concat = table.concat
local floor, log = math.floor, math.log

local helpers = {}

-- How deep a table in `var` may nest (JSON conversion has a recursion limit too).
local MAX_VAR_DEPTH = 100

local function json_problem(value, path, seen, depth)
  depth = depth or 0
  if depth > MAX_VAR_DEPTH then
    return "nests deeper than " .. MAX_VAR_DEPTH .. " levels (var holds JSON data only)"
  end
  local kind = type(value)
  if kind == "string" or kind == "number" or kind == "boolean" or kind == "nil" or value == null then
    return nil
  end
  if kind == "table" then
    if seen[value] then
      return path .. " contains a cycle (var holds JSON data only)"
    end
    seen[value] = true
    for key, member in next, value do
      local key_kind = type(key)
      if key_kind ~= "string" and key_kind ~= "number" then
        return path .. " has a " .. key_kind .. " key (var holds JSON data only)"
      end
      local problem = json_problem(member, path .. "." .. tostring(key), seen, depth + 1)
      if problem then
        return problem
      end
    end
    seen[value] = nil
    return nil
  end
  return path .. " cannot hold a " .. kind
    .. " (var holds JSON data only: strings, numbers, booleans and tables of them)"
end

function helpers.var(data)
  return setmetatable({}, {
    __index = data,
    __newindex = function(_, key, value)
      if type(key) ~= "string" then
        error("var keys must be strings, not " .. type(key), 2)
      end
      local problem = json_problem(value, "var." .. key, {})
      if problem then
        if problem:sub(1, 5) == "nests" then
          problem = "var." .. key .. " " .. problem
        end
        error(problem, 2)
      end
      data[key] = value
    end,
    __pairs = function()
      return next, data, nil
    end,
    __len = function()
      return #data
    end,
    __metatable = "var",
  })
end

function helpers.sys(data, in_arm)
  return setmetatable({}, {
    __index = function(_, key)
      if key == "index" and not in_arm then
        error("sys.index is only available inside a fanout arm", 2)
      end
      return data[key]
    end,
    __newindex = function(_, key)
      error("sys is read-only: cannot set sys." .. tostring(key), 2)
    end,
    __pairs = function()
      return next, data, nil
    end,
    __metatable = "sys is sealed",
  })
end

local function frozen(data, kind)
  return setmetatable({}, {
    __index = data,
    __newindex = function(_, key)
      error(kind .. " handles are frozen: cannot set ." .. tostring(key), 2)
    end,
    __pairs = function()
      return next, data, nil
    end,
    __tostring = function()
      return kind .. " " .. tostring(data.name)
    end,
    __metatable = kind .. " handle",
  })
end

-- The control globals and the infer forms, over the one async host function.
function helpers.bind_host(host, models)
  function jump(target)
    return host("jump", target)
  end
  function execute(target, input)
    return host("execute", target, input)
  end
  function fanout(worker, collection)
    return host("fanout", worker, collection)
  end
  models.infer = function(prompt)
    return host("infer", prompt)
  end
  helpers.model_infer = function(alias, prompt)
    return host("model_infer", alias, prompt)
  end
end

-- A model handle: frozen properties and `handle:infer(prompt)`.
function helpers.model_handle(data)
  data.infer = function(_, prompt)
    return helpers.model_infer(data.name, prompt)
  end
  return frozen(data, "model")
end

-- A tool handle: frozen properties.
function helpers.tool_handle(data)
  return frozen(data, "tool")
end

local result_meta = {
  __tostring = function(result)
    return result.text
  end,
}

function helpers.result(text, ok, item, exhausted)
  return setmetatable({ text = text, ok = ok, item = item, exhausted = exhausted }, result_meta)
end

function table.concat(list, separator, first, last)
  if separator == nil then
    separator = ""
  end
  first = first or 1
  last = last or #list
  local parts = {}
  for index = first, last do
    local value = list[index]
    local kind = type(value)
    if kind == "string" or kind == "number" then
      parts[#parts + 1] = value
    else
      local meta = getmetatable(value)
      if type(meta) == "table" and meta.__tostring then
        parts[#parts + 1] = tostring(value)
      else
        error(("invalid value (at index %d) in table for 'concat'"):format(index), 2)
      end
    end
  end
  return raw_concat(parts, separator)
end

-- A unit that ran out of its instruction budget or was cancelled stays dead: `pcall` and
-- `xpcall` re-raise its death instead of returning it, so no Lua code can swallow it. Host
-- errors they do return are plain messages (with `file:line:`), not mlua internals.
local function checked(ok, ...)
  alive()
  if ok then
    return ok, ...
  end
  return false, clean((...))
end

function pcall(f, ...)
  return checked(raw_pcall(f, ...))
end

-- A death raised from the instruction hook calls the message handler with the hook still
-- off; a dead unit therefore never runs the prompt's handler.
function xpcall(f, handler, ...)
  if type(handler) ~= "function" then
    return checked(raw_xpcall(f, handler, ...))
  end
  local function guarded(e)
    if not raw_pcall(alive) then
      return e
    end
    return handler(e)
  end
  return checked(raw_xpcall(f, guarded, ...))
end

-- Finalizers run with the instruction hook off, so prompt code may not declare them.
_ENV.setmetatable = function(target, meta)
  if type(meta) == "table" and rawget(meta, "__gc") ~= nil then
    error("__gc metamethods are not available to prompts: finalizers would run outside "
      .. "the instruction budget", 2)
  end
  return raw_setmetatable(target, meta)
end

-- `error` with a non-string value carries no position; remember where it was raised.
local raw_error = error
_ENV.error = function(message, level)
  if type(message) ~= "string" then
    local ok, rendered = raw_pcall(tostring, message)
    note_error(ok and type(rendered) == "string" and rendered or type(message), type(message))
  end
  if level == nil then
    level = 1
  end
  if type(level) == "number" and level > 0 then
    level = level + 1
  end
  return raw_error(message, level)
end

-- Library functions whose C loops run as long as an argument says, with the hook unable to
-- interrupt them: each charges its loop count to the instruction budget first.
local function count(value)
  if type(value) == "number" then
    return value
  end
  return 0
end

local raw_rep = string.rep
function string.rep(s, n, sep)
  -- The C loop runs n times even when nothing is copied; copying itself is cheap.
  if s == "" and (sep == nil or sep == "") then
    charge(count(n))
  else
    charge(count(n) / 64)
  end
  return raw_rep(s, n, sep)
end

local raw_move = table.move
function table.move(a1, f, e, t, a2)
  charge(count(e) - count(f) + 1)
  return raw_move(a1, f, e, t, a2)
end

local raw_insert = table.insert
function table.insert(list, ...)
  if select("#", ...) >= 2 and type(list) == "table" then
    charge(#list)
  end
  return raw_insert(list, ...)
end

local raw_remove = table.remove
function table.remove(list, ...)
  if type(list) == "table" then
    charge(#list)
  end
  return raw_remove(list, ...)
end

local raw_sort = table.sort
function table.sort(list, ...)
  if type(list) == "table" then
    local n = #list
    if type(n) == "number" and n > 1 then
      charge(n * (floor(log(n, 2)) + 1))
    end
  end
  return raw_sort(list, ...)
end

local raw_unpack = table.unpack
function table.unpack(list, i, j)
  if j ~= nil then
    charge(count(j) - count(i or 1) + 1)
  elseif type(list) == "table" then
    charge(#list)
  end
  return raw_unpack(list, i, j)
end

return helpers
