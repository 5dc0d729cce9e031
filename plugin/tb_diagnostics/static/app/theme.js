// Follow TensorBoard's theme. TB 2.21 toggles the class "dark-mode" on its
// own <body> (its dark-mode-supporter component), defaulting from
// prefers-color-scheme; the plugin iframe is same-origin, so we mirror that
// class and watch it. Outside TensorBoard, prefers-color-scheme decides.

export function watchTheme(onChange) {
  const root = document.documentElement;
  let parentBody = null;
  try {
    parentBody = window.parent !== window ? window.parent.document.body : null;
  } catch {
    parentBody = null;
  }
  const media = window.matchMedia("(prefers-color-scheme: dark)");
  const apply = () => {
    const dark = parentBody ? parentBody.classList.contains("dark-mode") : media.matches;
    if (root.classList.contains("dark") !== dark) {
      root.classList.toggle("dark", dark);
      onChange?.(dark);
    }
  };
  apply();
  if (parentBody) new MutationObserver(apply).observe(parentBody, { attributes: true, attributeFilter: ["class"] });
  else media.addEventListener("change", apply);
}
