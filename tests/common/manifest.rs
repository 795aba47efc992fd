//! Manifest texts for namespace `default` built from their limit lines, so a
//! test or bench writes only the limits it is about. Needs nothing but std:
//! the runtime bench includes this file by path.

/// A manifest for namespace `default`: each resource with its limits, one
/// `name: {…}` line each (YAML's flow style).
pub fn manifest(resources: &[(&str, &[&str])]) -> String {
    let mut text = String::from("namespace: default\nresources:\n");
    for (resource, limits) in resources {
        text.push_str(&format!("  {resource}:\n    limits:\n"));
        for limit in *limits {
            text.push_str(&format!("      {limit}\n"));
        }
    }
    text
}
