-- The per-VM prelude: sealed `sys`, the JSON-only `var` proxy, fanout result objects and a
-- `table.concat` that honours `__tostring`. Runs once per VM before any prompt code.
local null = ...
local type, error, tostring, setmetatable, getmetatable, next =
  type, error, tostring, setmetatable, getmetatable, next
local raw_concat = table.concat

local helpers = {}

local function json_problem(value, path, seen)
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
      local problem = json_problem(member, path .. "." .. tostring(key), seen)
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

return helpers
