package chaos

// checkNamespaces applies rule (m): a window is executed only by workers
// of the namespace its record carries.
func checkNamespaces(h History, add addFunc) {
	of := map[string]string{} // window -> the namespaces its records carry
	for _, r := range h.Published {
		if r.Namespace != "" {
			of[r.Window] = r.Namespace
		}
	}
	for _, a := range h.Attempts {
		ns, ok := of[a.Window]
		if !ok || a.Namespace == "" || a.Namespace == ns {
			continue
		}
		add("m", a.Window, "executed with token %d by worker %s of namespace %q, but the window belongs to namespace %q", a.Token, a.Worker, a.Namespace, ns)
	}
}
