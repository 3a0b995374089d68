//! `${VAR}` interpolation over every string of a parsed TOML document (the syntax is
//! `promptforge-env`'s, shared with the MCP server).

use promptforge_env::ExpandError;

use super::env::EnvLayers;

/// Interpolates every string value (not keys) of `value` in place.
///
/// On failure returns the dotted path of the offending key with the reason.
pub(crate) fn interpolate_value(
    value: &mut toml::Value,
    env: &EnvLayers,
    path: &str,
) -> Result<(), (String, ExpandError)> {
    match value {
        toml::Value::String(s) => {
            *s = env.env().expand(s).map_err(|err| (path.to_owned(), err))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_nested_values_and_names_the_path() {
        let env = EnvLayers::fixed([("PF_SET_Q".to_owned(), "v".to_owned())].into());
        let mut value: toml::Value =
            toml::from_str("[[model]]\nname = '${PF_SET_Q}'\n[[model]]\nname = '${PF_UNSET_Q}'\n")
                .unwrap();
        let (path, err) = interpolate_value(&mut value, &env, "").unwrap_err();
        assert_eq!(path, "model[1].name");
        assert_eq!(err, ExpandError::Unset("PF_UNSET_Q".into()));
        assert_eq!(value["model"][0]["name"].as_str(), Some("v"));
    }
}
