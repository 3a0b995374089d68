//! `${VAR}` interpolation over every string of a parsed TOML document.

use super::env::EnvLayers;

/// Why a string could not be interpolated.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum InterpolateError {
    /// `${NAME}` names a variable that is set nowhere.
    Unresolved(String),
    /// `${` without its closing brace, or an invalid name inside.
    Malformed(String),
}

/// Interpolates every string value (not keys) of `value` in place.
///
/// On failure returns the dotted path of the offending key with the reason.
pub(crate) fn interpolate_value(
    value: &mut toml::Value,
    env: &EnvLayers,
    path: &str,
) -> Result<(), (String, InterpolateError)> {
    match value {
        toml::Value::String(s) => {
            *s = interpolate_str(s, env).map_err(|err| (path.to_owned(), err))?;
        }
        toml::Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                interpolate_value(item, env, &format!("{path}[{i}]"))?;
            }
        }
        toml::Value::Table(table) => {
            for (key, item) in table.iter_mut() {
                let child = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                interpolate_value(item, env, &child)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Expands `${NAME}` from `env` and `$$` to `$`; any other `$` stays literal.
pub(crate) fn interpolate_str(input: &str, env: &EnvLayers) -> Result<String, InterpolateError> {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(tail) = after.strip_prefix('{') {
            let Some(end) = tail.find('}') else {
                return Err(InterpolateError::Malformed(
                    "`${` without a closing `}`".into(),
                ));
            };
            let name = &tail[..end];
            let valid = !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(InterpolateError::Malformed(format!(
                    "`${{{}}}` is not a valid variable reference",
                    super::files::quote(name)
                )));
            }
            match env.lookup(name) {
                Some(value) => out.push_str(&value),
                None => return Err(InterpolateError::Unresolved(name.to_owned())),
            }
            rest = &tail[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_and_escapes() {
        let env = EnvLayers::new();
        let home = std::env::var("PATH").unwrap();
        assert_eq!(
            interpolate_str("a${PATH}b", &env).unwrap(),
            format!("a{home}b")
        );
        assert_eq!(interpolate_str("cost $$5", &env).unwrap(), "cost $5");
        assert_eq!(
            interpolate_str("$$${PATH}", &env).unwrap(),
            format!("${home}")
        );
        assert_eq!(interpolate_str("a $ b", &env).unwrap(), "a $ b");
        assert_eq!(
            interpolate_str("${PF_SURELY_UNSET_VAR_X}", &env),
            Err(InterpolateError::Unresolved("PF_SURELY_UNSET_VAR_X".into()))
        );
        assert!(matches!(
            interpolate_str("${PATH", &env),
            Err(InterpolateError::Malformed(_))
        ));
        assert!(matches!(
            interpolate_str("${}", &env),
            Err(InterpolateError::Malformed(_))
        ));
    }

    #[test]
    fn walks_nested_values_and_names_the_path() {
        let env = EnvLayers::new();
        let mut value: toml::Value =
            toml::from_str("[[model]]\nname = 'x'\n[[model]]\nname = '${PF_UNSET_Q}'\n").unwrap();
        let (path, err) = interpolate_value(&mut value, &env, "").unwrap_err();
        assert_eq!(path, "model[1].name");
        assert_eq!(err, InterpolateError::Unresolved("PF_UNSET_Q".into()));
    }
}
