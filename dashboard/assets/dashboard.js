// Rheo dashboard: refreshes the live parts of a page without a reload.
//
// Every element with a data-live attribute and an id is replaced, every
// few seconds, by the element of the same id in a fresh copy of those
// parts, fetched from the server (which renders and escapes everything,
// and, asked with X-Rheo-Live, renders the live parts alone: a refresh
// costs what it swaps, not the whole page). Forms live outside those
// elements, so nothing typed is lost. Refreshing pauses while the tab is
// hidden.
"use strict";
(function () {
  var interval = Number(document.body.getAttribute("data-refresh") || 0);
  if (!interval || !window.fetch || !window.DOMParser) {
    return;
  }
  var status = document.getElementById("live-status");
  var busy = false;

  function show(state, title) {
    if (!status) {
      return;
    }
    status.className = "live live-" + state;
    status.textContent = state === "ok" ? "live" : state;
    if (title) {
      status.title = title;
    }
  }

  function refresh() {
    if (busy || document.hidden) {
      return;
    }
    busy = true;
    fetch(window.location.href, {
      headers: { "X-Rheo-Live": "1", Accept: "text/html" },
      credentials: "same-origin",
      cache: "no-store",
      redirect: "error"
    }).then(function (res) {
      if (!res.ok) {
        throw new Error("HTTP " + res.status);
      }
      return res.text();
    }).then(function (html) {
      var fresh = new DOMParser().parseFromString(html, "text/html");
      var parts = document.querySelectorAll("[data-live][id]");
      for (var i = 0; i < parts.length; i++) {
        var next = fresh.getElementById(parts[i].id);
        if (next) {
          parts[i].replaceWith(document.importNode(next, true));
        }
      }
      document.body.setAttribute("data-refreshed", String(Date.now()));
      show("ok", "updated " + new Date().toLocaleTimeString());
    }).catch(function (err) {
      show("stale", "refresh failed: " + err.message);
    }).finally(function () {
      busy = false;
    });
  }

  window.setInterval(refresh, interval);
  document.addEventListener("visibilitychange", function () {
    if (!document.hidden) {
      refresh();
    }
  });
})();
